"""The TF32 schedule built on the device (cuda/tf32_schedule.cu) against the C schedule
(csrc/acc_schedule_cost.c), which stays the reference: every cap's sum, max and count of task
costs and its split counts, and the rows of each cap in window order and longest-task-first order,
row for row.  Window offsets of hubs, splits, groups, empty windows, several tiles, and of every
real matrix; plans on both schedules give the same bits.  Marked `gpu`."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import _core, _tf32, datasets
from accspmm._format import BitTCF
from accspmm._validate import as_csr
from conftest import assert_bit_exact, int_dense, load_int_matrix, real_matrix_params, scipy_ref

pytestmark = pytest.mark.gpu

CONSTS = _tf32._INT_CONSTANTS


def _device(arr, dtype):
    from accspmm._device import DeviceArray

    return DeviceArray.from_host(np.ascontiguousarray(arr, dtype), accspmm._cuda.get_device())


def _poisoned(shape, dtype):
    from accspmm import _cuda
    from accspmm._device import DeviceArray

    d = DeviceArray(shape, dtype, _cuda.get_device())
    _cuda.memset(d.ptr, 0xA5, d.nbytes, None)
    return d


def device_prices(wo, caps=_tf32.CAPS):
    """{cap: (sum, max, tasks, slots, splits, cut, status)} from the device."""
    from accspmm import _cuda

    d_wo = _device(wo, np.int64)
    out = _poisoned((8 * len(caps),), np.int64)
    _cuda.tf32_schedule_price(d_wo.ptr, wo.size - 1, list(caps), CONSTS, out.ptr, None)
    table = out.to_host().reshape(len(caps), 8)
    return {c: tuple(int(x) for x in row[:7]) for c, row in zip(caps, table)}


def device_rows(wo, cap, ntasks, max_cost, lpt):
    from accspmm import _cuda

    d_wo = _device(wo, np.int64)
    d = _poisoned((max(ntasks, 1) * _tf32.TASK_WORDS,), np.int32)
    out = _poisoned((8,), np.int64)
    _cuda.tf32_schedule_rows(d_wo.ptr, wo.size - 1, cap, CONSTS, ntasks, max_cost, lpt, d.ptr, out.ptr, None)
    return d.to_host()[: ntasks * _tf32.TASK_WORDS].reshape(ntasks, _tf32.TASK_WORDS), out.to_host()


def check_offsets(wo, caps=_tf32.CAPS):
    """Every cap of ``caps``: the device's prices, counts and rows (both orders) equal the C schedule's."""
    wo = np.ascontiguousarray(wo, np.int64)
    prices = device_prices(wo, caps)
    sums, maxes, counts = _core.schedule_costs(wo, np.array(caps, np.int64), _tf32.WARPS, _tf32._CONSTANTS)
    for i, cap in enumerate(caps):
        s, mx, nt, slots, splits, cut, status = prices[cap]
        assert status == -1, (cap, status)
        tasks, cost, split_counts = _tf32.schedule(wo, cap)
        assert (s, mx, nt) == (sums[i], maxes[i], counts[i]), cap
        assert nt == tasks.shape[0] and s == cost.sum() and mx == (cost.max() if cost.size else 0), cap
        assert (slots, splits, cut) == tuple(split_counts), cap
        rows, totals = device_rows(wo, cap, nt, mx, False)
        np.testing.assert_array_equal(rows, tasks, err_msg=f"cap {cap}, window order")
        assert tuple(int(x) for x in totals[:7]) == prices[cap], cap
        rows, _ = device_rows(wo, cap, nt, mx, True)
        np.testing.assert_array_equal(rows, _core.lpt_rows(tasks, cost), err_msg=f"cap {cap}, LPT order")
    return prices


def offsets(nb):
    return np.concatenate(([0], np.cumsum(np.asarray(nb, np.int64))))


@pytest.mark.parametrize("kind", ["uniform", "skewed", "hubs", "empty", "one", "tiles", "runs"])
def test_device_schedule_equals_c_schedule(kind):
    rng = np.random.default_rng(7)
    if kind == "uniform":
        nb = rng.integers(0, 6, 3000)
    elif kind == "skewed":
        nb = rng.zipf(1.6, 5000).clip(max=4000)
    elif kind == "hubs":  # multi-part splits beside short windows, and a window of 0 blocks after each
        nb = rng.integers(0, 4, 2500)
        nb[rng.integers(0, 2500, 12)] = rng.integers(300, 30000, 12)
    elif kind == "empty":
        nb = np.zeros(1500, np.int64)
    elif kind == "one":
        nb = np.array([5])
    elif kind == "tiles":  # several 1024-window tiles, runs and warps across tile edges
        nb = rng.integers(0, 40, 4 * 1024 + 37)
    else:  # GROUP windows (cap < nb <= 2 cap) between runs of every length
        nb = np.where(rng.random(4000) < 0.15, rng.integers(5, 17, 4000), rng.integers(0, 5, 4000))
    check_offsets(offsets(nb))


def test_device_schedule_no_windows():
    prices = device_prices(np.zeros(1, np.int64))
    assert all(p == (0, 0, 0, 0, 0, 0, -1) for p in prices.values())


def test_device_schedule_reports_bad_offsets():
    wo = offsets([1, 2, 3, 4])
    wo[3] = 1  # window 2 has -2 blocks
    prices = device_prices(wo, (0, 4))
    assert all(p[6] == 2 * 4 + 1 for p in prices.values())
    with pytest.raises(ValueError):
        _tf32.schedule(wo, 4)


@pytest.mark.parametrize("path", real_matrix_params())
def test_device_schedule_real_matrix(path):
    A = load_int_matrix(path)
    fmt = BitTCF.from_csr(as_csr(A).canonicalized(), None)
    check_offsets(fmt.window_offsets)


@pytest.mark.parametrize("n", [1, 33, 128])
def test_plans_on_either_schedule_agree(n, bundled_int):
    """A plan whose schedule was built on the device and one on the host: the same decision, the same
    task rows on the device, the same bits (the Tensor Cores forced: n = 128 would run on the wide CSR
    kernel, which reads no schedule)."""
    A = bundled_int
    B = int_dense(A.shape[1], n)
    out = {}
    for where in ("device", "host"):
        p = accspmm.plan(A, device="gpu", tuning={"schedule": where, "autotune": False, "wide": "bittcf"})
        C = p(B)
        assert_bit_exact(C, scipy_ref(A, B))
        report = p.stats["schedule_by_n"][n]
        assert report["schedule_on"] == where
        cap, v = p._tf32.decide(n)
        ptr, nt = p._tf32._device_tasks(cap, v["order"])
        p._tf32._settle()  # rows built here (a narrow width on the CSR kernel has none) are on the side stream
        host = np.empty(max(nt, 1) * _tf32.TASK_WORDS, np.int32)
        accspmm._cuda.memcpy_dtoh(host, ptr, None)
        out[where] = (report["cap"], report["predicted"], report["tasks"], host, C)
    d, h = out["device"], out["host"]
    assert d[:3] == h[:3]
    np.testing.assert_array_equal(d[3], h[3])
    np.testing.assert_array_equal(d[4], h[4])


def test_plan_with_splits_on_the_device_schedule():
    """A hub row split into several parts (workspace slots and counters from the device's counts)."""
    rng = np.random.default_rng(3)
    m, k = 600, 40000
    A = sp.random(m, k, density=0.0005, random_state=4, format="lil", dtype=np.float32)
    A[5, :] = rng.integers(1, 5, k).astype(np.float32)
    A[300, : k // 2] = 2.0
    A = sp.csr_matrix(A)
    A.data = np.round(A.data * 8).astype(np.float32) + 1
    B = int_dense(k, 64)
    p = accspmm.plan(A, device="gpu", tuning={"cap": 8, "autotune": False})
    C = p(B)
    assert_bit_exact(C, scipy_ref(A, B))
    report = p.stats["schedule_by_n"][64]
    assert report["schedule_on"] == "device" and report["cap"] == 8
    assert p._tf32._counts(8)[1] >= 2  # multi-part splits


def test_prices_in_a_host_slot():
    """The pricing kernel writes straight into mapped pinned memory (what plans read), the same numbers
    as into device memory; a slot freed unread waits for its kernel first."""
    from accspmm import _cuda
    from accspmm._device import HostSlot

    wo = offsets(np.random.default_rng(5).zipf(1.7, 3000).clip(max=500))
    d_wo = _device(wo, np.int64)
    side = _cuda.side_stream()
    slot = HostSlot(side)
    _cuda.tf32_schedule_price(d_wo.ptr, wo.size - 1, list(_tf32.CAPS), CONSTS, slot.ptr, side)
    got = slot.read(8 * len(_tf32.CAPS))
    ref = device_prices(wo)
    assert [tuple(got[8 * i : 8 * i + 7]) for i in range(len(_tf32.CAPS))] == [ref[c] for c in _tf32.CAPS]
    slot.free()
    unread = HostSlot(side)
    _cuda.tf32_schedule_price(d_wo.ptr, wo.size - 1, list(_tf32.CAPS), CONSTS, unread.ptr, side)
    unread.free()  # synchronises the side stream before the slot goes back
    assert unread.ptr == 0
    p = accspmm.plan(sp.random(300, 200, density=0.05, random_state=1, format="csr", dtype=np.float32),
                     device="gpu")
    assert isinstance(p._dev["schedule_prices"], HostSlot)
    p.close()  # never called: the slot is freed after its kernel


@pytest.mark.parametrize("W", [255, 256, 257, 1536, 1537, 2 * 1536 + 255])
def test_device_schedule_at_block_and_tile_edges(W):
    """One block per cap up to 1,536 windows, the cooperative grid above; tiles of 256 windows."""
    nb = np.random.default_rng(W).integers(0, 12, W)
    nb[W // 2] = 700  # a multi-part split in the middle
    check_offsets(offsets(nb), caps=(0, 2, 8, 64))


def test_device_schedule_one_block_per_cap(monkeypatch):
    """The path a device that refuses the cooperative grid takes: one block per cap over every window."""
    monkeypatch.setenv("ACCSPMM_SCHEDULE_MAX_BLOCKS", "1")
    nb = np.random.default_rng(11).zipf(1.6, 6000).clip(max=3000)
    check_offsets(offsets(nb), caps=(0, 4, 32))


def test_device_schedule_hub_split_in_many_parts():
    """A window of 125,000 blocks (a dense row of 10^6 columns) split in 31,250 parts at cap 2: one
    thread writes them all; more than 4,096 tasks take the device-wide LPT sort."""
    nb = np.random.default_rng(12).integers(0, 5, 3000)
    nb[1234] = 125_000
    check_offsets(offsets(nb), caps=(2, 256))


def test_prices_without_a_host_slot(monkeypatch, bundled_int):
    """Where no host slot can be had (no unified addressing, no pinned memory left), the prices go to a
    device array and come back by a copy: the same decision and bits."""
    from accspmm import _device

    A = bundled_int
    B = int_dense(A.shape[1], 64)
    ref = accspmm.plan(A, device="gpu")
    C_ref = ref(B)
    monkeypatch.setattr(_device.HostSlot, "try_new", classmethod(lambda cls, stream: None))
    p = accspmm.plan(A, device="gpu")
    assert not isinstance(p._dev["schedule_prices"], _device.HostSlot)
    assert_bit_exact(p(B), scipy_ref(A, B))
    np.testing.assert_array_equal(p(B), C_ref)
    assert p.stats["schedule_by_n"][64]["cap"] == ref.stats["schedule_by_n"][64]["cap"]
    assert p.stats["schedule_by_n"][64]["predicted"] == ref.stats["schedule_by_n"][64]["predicted"]


@pytest.mark.parametrize("kind", datasets.ADVERSARIAL)
def test_default_plans_on_adversarial_shapes(kind):
    """Default GPU plans (device schedule) on the adversarial generators: bit-exact against scipy at
    N = 1, 33 and 128, and rows identical to the C schedule's for the cap each width chose."""
    A = datasets.adversarial(kind, 120_000)
    rng = np.random.default_rng(1)
    A.data = rng.integers(1, 9, A.nnz).astype(np.float32) * rng.choice([-1, 1], A.nnz).astype(np.float32)
    p = accspmm.plan(A, device="gpu")
    for n in (1, 33, 128):
        B = int_dense(A.shape[1], n, seed=n)
        assert_bit_exact(p(B), scipy_ref(A, B))
        report = p.stats["schedule_by_n"][n]
        assert report["schedule_on"] == "device"
        cap, v = p._tf32.decide(n)
        ptr, nt = p._tf32._device_tasks(cap, v["order"])
        p._tf32._settle()  # rows built here (a narrow width on the CSR kernel has none) are on the side stream
        rows = np.empty(max(nt, 1) * _tf32.TASK_WORDS, np.int32)
        accspmm._cuda.memcpy_dtoh(rows, ptr, None)
        tasks, cost, _ = _tf32.schedule(p._tf32._window_offsets, cap)
        ref = _core.lpt_rows(tasks, cost) if v["order"] else tasks
        np.testing.assert_array_equal(rows.reshape(-1, _tf32.TASK_WORDS)[:nt], ref)
    p.close()


@pytest.mark.parametrize("kind", ["star", "hub"])
def test_hub_window_in_at_most_split_parts_max_parts(kind):
    """Where the packing limit would cut a hub window into thousands of parts (a star graph: 2 blocks a
    window but one of 25,000), the decision also weighs the caps up to one that cuts it into at most
    ``SPLIT_PARTS_MAX`` and takes one of them, on both schedules: the same longest window (the device's
    from the identity's longest task, the host's from the offsets), the same cap, and exact results."""
    A = datasets.adversarial(kind, 400_000)
    A.data = np.random.default_rng(2).integers(1, 5, A.nnz).astype(np.float32)
    wo = BitTCF.from_csr(as_csr(A).canonicalized(), None).window_offsets
    longest = int(np.diff(wo).max())
    limited = _tf32.packing_caps(_tf32.CAPS, float(wo[-1]) / (len(wo) - 1))
    assert longest > _tf32.WARPS * _tf32.SPLIT_PARTS_MAX * max(limited)
    out = {}
    for where in ("device", "host"):
        p = accspmm.plan(A, device="gpu", tuning={"schedule": where, "autotune": False})
        for n in (32, 128):
            B = int_dense(A.shape[1], n, seed=n)
            assert_bit_exact(p(B), scipy_ref(A, B))
            cap = p.stats["schedule_by_n"][n]["cap"]
            assert cap > max(limited)  # a cap the packing limit alone would not have offered
            assert "in at most" in p.stats["schedule_by_n"][n]["reason"]
            out[where, n] = cap
        assert p._tf32._longest_window() == longest
        p.close()
    assert out["device", 32] == out["host", 32] and out["device", 128] == out["host", 128]
