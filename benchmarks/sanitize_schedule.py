"""The TF32 schedule built on the device (cuda/tf32_schedule.cu) against the C schedule, for
compute-sanitizer (``bash benchmarks/sanitize_gpu.sh benchmarks/sanitize_schedule.py``; also run by
benchmarks/sanitize_gpu.py): one block per cap (300 windows) and the cooperative grid (6,000), rows
in window order and in LPT order by the block sort (up to 4,096 tasks) and by the device-wide sort
(more), a hub window split in many parts, and a default plan on the cooperative grid.  Exits 1 on any
wrong result."""

import numpy as np
import scipy.sparse as sp

import accspmm
from accspmm import _core, _cuda, _tf32
from accspmm._device import DeviceArray, HostSlot


def run(check, rng):
    side = _cuda.side_stream()
    for W in (300, 6000):
        nbw = rng.integers(0, 6, W)
        nbw[W // 3] = 5000
        wo = np.concatenate(([0], np.cumsum(nbw))).astype(np.int64)
        d_wo = DeviceArray.from_host(wo, 0)
        slot = HostSlot(side)
        _cuda.tf32_schedule_price(d_wo.ptr, W, list(_tf32.CAPS), _tf32._INT_CONSTANTS, slot.ptr, side)
        table = slot.read(8 * len(_tf32.CAPS))
        slot.free()
        for i, cap in (1, 2), (5, 32):
            tasks, cost, _ = _tf32.schedule(wo, cap)
            nt, mx = table[8 * i + 2], table[8 * i + 1]
            check(nt == tasks.shape[0] and table[8 * i + 6] == -1, f"device schedule W={W} cap={cap}: count")
            for lpt in (False, True):
                d = DeviceArray((max(nt, 1) * _tf32.TASK_WORDS,), np.int32, 0)
                _cuda.tf32_schedule_rows(d_wo.ptr, W, cap, _tf32._INT_CONSTANTS, nt, mx, lpt, d.ptr, None, side)
                _cuda.synchronize(side)
                ref = _core.lpt_rows(tasks, cost) if lpt else tasks
                check(np.array_equal(d.to_host().reshape(-1, _tf32.TASK_WORDS)[:nt], ref),
                      f"device schedule W={W} cap={cap} lpt={lpt}: rows")
    A = sp.random(16000, 900, density=0.004, format="csr", random_state=2, dtype=np.float32)
    A.data = rng.integers(-8, 9, size=A.nnz).astype(np.float32)
    B = rng.integers(-8, 9, size=(900, 64)).astype(np.float32)
    p = accspmm.plan(A, device="gpu", tuning={"wide": "bittcf"})  # n = 64 would run on the wide CSR kernel
    check(np.array_equal(p(B), A @ B), "default plan on the device schedule (2,000 windows)")
    check(p.stats["schedule_by_n"][64]["schedule_on"] == "device", "the plan's schedule was not the device's")
    p.close()


if __name__ == "__main__":
    state = {"ok": True}

    def check(cond, what):
        if not cond:
            print("WRONG:", what)
        state["ok"] &= bool(cond)

    run(check, np.random.default_rng(0))
    print("sanitize schedule:", "OK" if state["ok"] else "WRONG")
    raise SystemExit(0 if state["ok"] else 1)
