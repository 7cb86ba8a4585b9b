"""Scores the BSR16 quads' critical rule (accspmm._half.QUAD_CRITICAL_RATIO, QUAD_CRITICAL_MAX_N) on forced-kernel
times: for each threshold and widest width, the default plan's kernel time against the rule before it, in
geometric mean per width, the worst case, and the per-case best kernel.  No GPU needed:

    python benchmarks/fit_quad_rule.py [benchmarks/results/h100_quad_critical.json ...]
        [--ratios 2.5 3.0 3.1 3.3 3.5] [--max-n 128 256 512]

Input rows (``half_pair_widths.py`` with ``--kernels rows pairs quads auto`` records all but ``old``, which is its
``auto`` at the commit before the rule): matrix, n, rows, pairs, quads (forced kernels' us), old (the older
rules' kernel's us), old_kernel, critical_ratio (quad_schedule's makespan over the row schedule's longest task).
The rule: quads at n <= max_n where critical_ratio <= ratio (and wherever the older rules took them)."""

from __future__ import annotations

import argparse
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def score(rows, ratio, max_n):
    """{n: [gains]} and [(gain, matrix, n)] of the rule against the older one (gain = old us / new us)."""
    by_n, cases = {}, []
    for r in rows:
        quads = r["old_kernel"] == "quads" or (r["critical_ratio"] <= ratio and r["n"] <= max_n)
        new = r["quads"] if quads and r["old_kernel"] != "quads" else r["old"]
        g = r["old"] / new
        by_n.setdefault(r["n"], []).append(g)
        cases.append((g, r["matrix"], r["n"]))
    return by_n, cases


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", default=[os.path.join(HERE, "results", "h100_quad_critical.json")])
    ap.add_argument("--ratios", type=float, nargs="*", default=[2.5, 3.0, 3.1, 3.3, 3.5])
    ap.add_argument("--max-n", type=int, nargs="*", default=[128, 256, 512])
    args = ap.parse_args()
    rows = [r for f in args.files for r in json.load(open(f))["rows"]]
    best = [min(r["rows"], r["pairs"], r["quads"]) for r in rows]
    oracle = geomean([r["old"] / b for r, b in zip(rows, best)])
    print(f"{len(rows)} cases, {len({r['matrix'] for r in rows})} matrices; the per-case best kernel: {oracle:.3f}x")
    ns = sorted({r["n"] for r in rows})
    print("| ratio | max n | all | " + " | ".join(f"n = {n}" for n in ns) + " | worst | cases changed |")
    print("|---" * (len(ns) + 5) + "|")
    for max_n in args.max_n:
        for ratio in args.ratios:
            by_n, cases = score(rows, ratio, max_n)
            worst = min(cases)
            print(f"| {ratio} | {max_n} | {geomean([c[0] for c in cases]):.3f} | "
                  + " | ".join(f"{geomean(by_n[n]):.3f}" for n in ns)
                  + f" | {worst[0]:.2f} ({worst[1]}, n = {worst[2]}) | {sum(c[0] != 1 for c in cases)} |")


if __name__ == "__main__":
    main()
