"""A default plan's setup per matrix, for a before/after of two builds on one boot of the GPU machine
(host times there move by +-30% between boots, and by as much between two processes of one boot).

In one process, alternated (what to use; one line per matrix, the two sides' medians and their ratio,
the geometric mean last):

    python benchmarks/ab_setup.py ab DIR NAME... --old OLD_PARENT [--reps 25]

  OLD_PARENT holds the old build as a package named ``accspmm_old``: ``git archive <commit> accspmm``
  unpacked, with that commit's extensions (benchmarks/prebuild.sh) in it, and the directory renamed
  (the package imports itself relatively only).  Each repetition makes a plan with each side, in
  alternating order, and times ``plan(A)`` plus the first launch on device pointers (as
  ``accspmm._payback.measure``: torch is not imported, so neither side registers its torch op),
  synchronised, wall clock.  Run an A/A first (the same build on both sides): on the H100 it showed
  a bias of its own for the largest matrix (G3_circuit 0.94, the side imported as ``accspmm``
  slower), so a ratio is read against the A/A's.

    python benchmarks/ab_setup.py ab DIR NAME... --old-tuning '{"schedule": "host"}'

  The same build on both sides, the old side's plans made with that ``tuning`` (a change that a
  tuning key can switch off: no second package, no import bias).

One process per side (the older way; torch B, the call as users make it):

    for r in 1 2 3; do
      PYTHONPATH=OLD_CHECKOUT python benchmarks/ab_setup.py old DIR NAME...
      PYTHONPATH=.            python benchmarks/ab_setup.py new DIR NAME...
    done > ab.txt

  OLD_CHECKOUT as above without the renaming.  One line per matrix: TAG NAME, the median, 25th and
  75th percentile of ``--reps`` setups in ms, and the plan's own ``stats["seconds"]["total"]``.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import time

import numpy as np

N_DEFAULT = 128


def in_process(args):
    """Both builds (or one build, two tunings) in this process, alternated (module docstring)."""
    import json

    if args.old:
        sys.path.insert(0, args.old)
    import accspmm
    from accspmm import _cuda, datasets
    from accspmm._device import DeviceArray

    if args.old:
        sides = {"old": (importlib.import_module("accspmm_old"), {}), "new": (accspmm, {})}
    else:
        sides = {"old": (accspmm, {"tuning": json.loads(args.old_tuning)}), "new": (accspmm, {})}
    n = args.n

    def setup(side, A, B, C):
        mod, kwargs = side
        _cuda.synchronize(None)
        t0 = time.perf_counter()
        p = mod.plan(A, **kwargs)
        p._launch(B.ptr, C.ptr, n, None)
        _cuda.synchronize(None)
        t = time.perf_counter() - t0
        p.close()
        return t

    def arrays(A):
        return (DeviceArray.from_host(np.ones((A.shape[1], n), np.float32), _cuda.get_device()),
                DeviceArray((A.shape[0], n), np.float32, _cuda.get_device()))

    warm = datasets.load_matrix(datasets.bundled_path(), np.float32)
    B, C = arrays(warm)
    for mod in sides.values():  # context, pools, staging, kernel modules of both builds
        for _ in range(3):
            setup(mod, warm, B, C)
    ratios = []
    for name in args.names:
        A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32)
        B, C = arrays(A)
        t = {"old": [], "new": []}
        for r in range(args.reps):
            for tag in ("old", "new") if r % 2 == 0 else ("new", "old"):
                t[tag].append(setup(sides[tag], A, B, C))
        old, new = np.median(t["old"]) * 1e3, np.median(t["new"]) * 1e3
        ratios.append(old / new)
        print(f"{name:15s} old {old:.3f} new {new:.3f} ms  old/new {old / new:.3f}  (25th percentile old "
              f"{np.percentile(t['old'], 25) * 1e3:.3f} new {np.percentile(t['new'], 25) * 1e3:.3f})", flush=True)
        B.free()
        C.free()
    print(f"geomean old/new {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)} matrices")


def one_side(args):
    """This process's build alone, torch B (module docstring)."""
    import torch

    import accspmm
    from accspmm import datasets

    warm = datasets.load_matrix(datasets.bundled_path(), np.float32)
    accspmm.plan(warm)(torch.ones(warm.shape[1], args.n, device="cuda"))  # context, allocator, modules
    for name in args.names:
        A = datasets.load_matrix(datasets.matrix_path(args.dir, name), np.float32)
        B = torch.randn(A.shape[1], args.n, device="cuda")
        setup, total = [], []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            p = accspmm.plan(A)
            p(B)
            torch.cuda.synchronize()
            setup.append(time.perf_counter() - t0)
            total.append(p.stats["seconds"]["total"])
            p.close()
        q = np.percentile(setup, [25, 50, 75]) * 1e3
        print(f"{args.tag} {name} {q[1]:.3f} {q[0]:.3f} {q[2]:.3f} plan_total {np.median(total) * 1e3:.3f}",
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tag", help="a name for this side's lines, or 'ab' with --old or --old-tuning")
    ap.add_argument("dir")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--n", type=int, default=N_DEFAULT)
    ap.add_argument("--reps", type=int, default=None, help="setups per matrix and side (25 with --old, else 9)")
    ap.add_argument("--old", help="a directory holding the old build as the package accspmm_old: both in one process")
    ap.add_argument("--old-tuning", help="with 'ab' and no --old: the old side is this build with plan(A, tuning=JSON)")
    args = ap.parse_args()
    if args.old or args.old_tuning:
        args.reps = args.reps or 25
        in_process(args)
    else:
        args.reps = args.reps or 9
        one_side(args)


if __name__ == "__main__":
    main()
