"""Refits the TF32 schedule cost model's constants (accspmm._tf32: WB, FILL, REDUCE, TASK, MERGE and
the thread blocks per SM the pricing assumes) on measured times of every cap.

    python benchmarks/fit_caps.py DIR variant_guess.json [more.json ...] [--out fit.json]

The JSON files come from ``benchmarks/variant_guess.py`` (one build, any number of runs: the time of a
cap is the minimum over the files): each case holds the default plan's variant timed at every cap of
``CAPS``.  The window offsets (all the model sees) are rebuilt here from the matrices of DIR with the C
builder, which is bit-identical to the GPU build.

For a set of constants, each case's cap is the one the model predicts fastest (ties: the larger cap,
as ``TF32Runner.decide``), and its regret is that cap's measured time over the fastest cap's.  A grid
search minimises the geometric-mean regret over all cases; leave-one-matrix-out cross-validation
(fit on the other matrices, score the held-out one) estimates the regret on matrices the fit has
not seen.  Prints the current constants' regret, the fit's, and the cross-validated one.

    python benchmarks/fit_caps.py DIR variant_guess.json --penalties

keeps the constants and scores ``TF32Runner.decide``'s choice itself (the caps ``packing_caps``
keeps) over a grid of its two extra terms (``accspmm._tf32.decision_predictions``: ``cut`` units of
work per window cut over several warps, a factor ``1 + packed`` on every cap but the identity, both
only where the identity schedule fills a wave); (0, 0) is the list-scheduling bound alone.  Prints
the bound's regret, the library's setting's (``DECISION_TERMS`` of the runs' precision), the grid's best with
leave-one-matrix-out cross-validation, and the cases the library's setting moves by more than 3%.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from accspmm import _core, _tf32, datasets  # noqa: E402
from accspmm._format import BitTCF  # noqa: E402
from accspmm._validate import as_csr  # noqa: E402

GRID = {"WB": (0, 1, 2, 4), "FILL": (0, 1, 2, 4, 8), "REDUCE": (0, 2, 4, 8), "TASK": (0, 1, 2, 4, 8, 16),
        "MERGE": (0, 2, 4)}
PFAC = (0.5, 1.0, 1.5, 2.0, 3.0)  # x the variant's thread blocks per SM in the pricing


def tag_variant(tag: str) -> dict:
    """'stg-s2d2-o0-lpt' -> the fields blocks_per_sm needs."""
    parts = tag.split("-")
    return {"staged": int(parts[0] == "stg"), "slice_s": int(parts[1][1]), "depth": int(parts[1][3])}


def load_cases(files):
    docs = [json.load(open(f)) for f in files]
    runs = [{(c["matrix"], c["n"]): c for c in d["cases"]} for d in docs]
    elem = _tf32.ELEM[docs[0].get("precision", "tf32")]
    cases = []
    for key, c in runs[0].items():
        tag = c["guess"].split("@")[0]
        t = {}
        for cap in _tf32.CAPS:
            ms = [r[key]["ms"].get(f"{tag}@{cap}") for r in runs if key in r]
            if ms and None not in ms:
                t[cap] = min(ms)
        v = tag_variant(tag)
        cases.append({"matrix": key[0], "n": key[1], "t": t, "best": min(t.values()),
                      "slices": -(-key[1] // _tf32.slice_cols(elem, v["slice_s"])), "bps": _tf32.blocks_per_sm(v),
                      "elem": elem,
                      "model_cap": int(c["guess"].split("@")[1])})
    return cases


def costs(offsets, consts):
    sums, maxes, ntasks = _core.schedule_costs(offsets, np.asarray(_tf32.CAPS, np.int64), _tf32.WARPS,
                                               tuple(float(x) for x in consts))
    return sums, maxes, ntasks


def regrets(cases, table, consts, pfac):
    """{case index: regret} for constants ``consts`` (a key of ``table``: matrix -> (sums, maxes, ntasks))."""
    out = {}
    for i, c in enumerate(cases):
        sums, maxes, ntasks = table[consts][c["matrix"]]
        P = _tf32.REF_SMS * c["bps"] * pfac
        pred = {cap: (s * c["slices"] / P + w if t else 0.0) for cap, s, w, t in zip(_tf32.CAPS, sums, maxes, ntasks)
                if cap in c["t"]}
        cap = min(pred, key=lambda x: (pred[x], -x))
        out[i] = c["t"][cap] / c["best"]
    return out


CUT = (0, 4, 8, 12, 16, 24, 32, 48, 64)
PACKED = (0, 0.02, 0.03, 0.05, 0.08, 0.1)


def window_offsets(directory, names) -> dict:
    """{name: window offsets} of the matrices ``names`` of ``directory`` (the C builder's BitTCF);
    exits naming the missing ones."""
    offsets = {}
    for f in datasets.matrix_files(directory):
        name = datasets.matrix_name(f)
        if name in names:
            csr = as_csr(datasets.load_matrix(f, np.float32)).canonicalized()
            offsets[name] = np.ascontiguousarray(BitTCF.from_csr(csr).window_offsets, np.int64)
    missing = set(names) - set(offsets)
    if missing:
        sys.exit(f"matrices not in {directory}: {sorted(missing)}")
    return offsets


def penalties(args):
    """--penalties (module docstring)."""
    cases = load_cases(args.files)
    names = sorted({c["matrix"] for c in cases})
    info = {}
    for name, wo in window_offsets(args.dir, names).items():
        mean = float(wo[-1]) / (wo.size - 1) if wo.size > 1 else 0.0
        longest = int(np.diff(wo).max()) if wo.size > 1 else 0
        info[name] = (_tf32.price_terms(wo, _tf32.CAPS), _tf32.packing_caps(_tf32.CAPS, mean, longest))

    def choose(c, cut, packed):
        (terms, identity), kept = info[c["matrix"]]
        P = _tf32.REF_SMS * c["bps"]
        pred = _tf32.decision_predictions({k: v for k, v in terms.items() if k in kept and k in c["t"]},
                                          identity, c["slices"], P, cut, packed)
        return min(pred, key=lambda x: (pred[x], -x))

    every = range(len(cases))
    lib = _tf32.DECISION_TERMS[cases[0]["elem"]]
    grid = sorted({(a, b) for a in CUT for b in PACKED} | {lib})
    sc = {k: {i: cases[i]["t"][choose(cases[i], *k)] / cases[i]["best"] for i in every} for k in grid}
    held = {}
    for m in names:
        train = [i for i in every if cases[i]["matrix"] != m]
        k = min(grid, key=lambda k: (gmean(sc[k][i] for i in train), k != (0, 0)))
        held.update({i: sc[k][i] for i in every if cases[i]["matrix"] == m})
    best = min(grid, key=lambda k: (gmean(sc[k].values()), k != (0, 0)))
    base = sc[(0, 0)]
    print(f"{len(cases)} cases, {len(names)} matrices; the decision's cap regret (geomean, max):")
    print(f"  the bound alone: {gmean(base.values()):.4f}, {max(base.values()):.3f}")
    print(f"  the library's (cut {lib[0]}, packed {lib[1]}): {gmean(sc[lib].values()):.4f}, "
          f"{max(sc[lib].values()):.3f}")
    print(f"  the grid's best (cut {best[0]}, packed {best[1]}): {gmean(sc[best].values()):.4f}, "
          f"{max(sc[best].values()):.3f}; leave-one-matrix-out {gmean(held.values()):.4f}, {max(held.values()):.3f}")
    moved = sorted((i for i in every if abs(sc[lib][i] / base[i] - 1) > 0.03), key=lambda i: sc[lib][i] / base[i])
    for i in moved:
        c = cases[i]
        print(f"  {c['matrix']:16s} n={c['n']:4d} cap {choose(c, 0, 0)} -> {choose(c, *lib)}: "
              f"regret {base[i]:.3f} -> {sc[lib][i]:.3f}")


def gmean(xs):
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=None)
    ap.add_argument("--penalties", action="store_true", help="score the decision with the two extra terms")
    args = ap.parse_args()
    if args.penalties:
        return penalties(args)
    cases = load_cases(args.files)
    names = sorted({c["matrix"] for c in cases})
    offsets = window_offsets(args.dir, names)
    current = (int(_tf32.WB), int(_tf32.FILL), int(_tf32.REDUCE), int(_tf32.TASK), int(_tf32.MERGE))
    combos = list(itertools.product(*GRID.values()))
    if current not in combos:
        combos.append(current)
    table = {k: {m: costs(offsets[m], k) for m in names} for k in combos}
    scores = {(k, p): regrets(cases, table, k, p) for k in combos for p in PFAC}

    def score(key, idx):
        return gmean(scores[key][i] for i in idx)

    every = range(len(cases))
    cur = score((current, 1.0), every)
    best = min(scores, key=lambda key: (score(key, every), key != (current, 1.0)))
    # leave one matrix out: fit on the rest, score the held-out matrix's cases
    held = {}
    for m in names:
        train = [i for i, c in enumerate(cases) if c["matrix"] != m]
        test = [i for i, c in enumerate(cases) if c["matrix"] == m]
        k = min(scores, key=lambda key: (score(key, train), key != (current, 1.0)))
        for i in test:
            held[i] = scores[k][i]
    cv = gmean(held.values())
    fields = list(GRID) + ["pricing blocks/SM factor"]
    print(f"{len(cases)} cases, {len(names)} matrices, {len(combos) * len(PFAC)} settings")
    print(f"current constants {dict(zip(fields, (*current, 1.0)))}: cap regret geomean {cur:.4f}, "
          f"max {max(scores[(current, 1.0)].values()):.3f}")
    print(f"fit on all: {dict(zip(fields, (*best[0], best[1])))}: geomean {score(best, every):.4f}, "
          f"max {max(scores[best].values()):.3f}")
    print(f"leave-one-matrix-out: geomean {cv:.4f}, max {max(held.values()):.3f}")
    worst = sorted(every, key=lambda i: -scores[best][i])[:8]
    for i in worst:
        c = cases[i]
        print(f"  {c['matrix']:16s} n={c['n']:4d} regret fit {scores[best][i]:.3f} current "
              f"{scores[(current, 1.0)][i]:.3f} held-out {held[i]:.3f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"files": args.files, "current": list(current), "current_regret": cur,
                       "fit": {"constants": list(best[0]), "pricing_factor": best[1], "regret": score(best, every)},
                       "cv_regret": cv,
                       "cases": [dict(matrix=c["matrix"], n=c["n"], current=scores[(current, 1.0)][i],
                                      fit=scores[best][i], held_out=held[i]) for i, c in enumerate(cases)]},
                      fh, indent=1)


if __name__ == "__main__":
    main()
