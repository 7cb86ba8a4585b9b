"""GPU tests of the call as users make it (marked `gpu`): the C steady-state call, no host
synchronisation or allocation in steady state, CUDA-graph capture and replay (PyTorch and CuPy),
NaN/inf in B with scipy's semantics under every kernel variant and schedule, and the PyTorch op
on CUDA (autograd, torch.compile, CUDA graphs).  Integer data: results must equal scipy bit for
bit, non-finite entries included (np.array_equal with equal_nan)."""

import time

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from conftest import assert_capture_needs_warm_up, int_dense, long_window_matrix, with_int_values

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch") if accspmm.cuda_available() else None
cp = pytest.importorskip("cupy") if accspmm.cuda_available() else None


def _same(C, ref):
    C = C.cpu().numpy() if isinstance(C, torch.Tensor) else cp.asnumpy(C) if isinstance(C, cp.ndarray) else C
    assert C.shape == ref.shape and C.dtype == ref.dtype
    bad = ~((C == ref) | (np.isnan(C) & np.isnan(ref)))
    assert not bad.any(), f"{int(bad.sum())} elements differ, first at {np.argwhere(bad)[0]}"


# ---- the C steady-state call ---------------------------------------------------------------

@pytest.fixture(params=["torch", "torch-attributes", "cupy"])
def lib(request, monkeypatch):
    """CuPy, and PyTorch through its DLPack C exchange API (where it has one) or through
    data_ptr()/stride()/new_empty (the route for older PyTorch)."""
    from accspmm import _device

    if request.param == "torch-attributes":
        monkeypatch.setenv("ACCSPMM_NO_DLPACK_API", "1")
    _device._interop_done.discard("torch")
    yield request.param.split("-")[0]
    monkeypatch.delenv("ACCSPMM_NO_DLPACK_API", raising=False)
    _device._interop_done.discard("torch")
    _device.register_interop("torch")


def test_steady_state_takes_the_c_call(bundled_int, lib):
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    launcher = p._tf32.launcher
    cases = []
    for n in (1, 40, 128):
        B = int_dense(k, n, seed=n)
        if lib == "torch":
            Bg = torch.from_numpy(B).cuda()
            out = torch.full((m, n), float("nan"), device="cuda")
            vec = Bg[:, 0].contiguous()
        else:
            Bg = cp.asarray(B)
            out = cp.full((m, n), cp.nan, cp.float32)
            vec = cp.ascontiguousarray(Bg[:, 0])
        _same(p(Bg), np.asarray(A @ B))  # first call for n: Python decides, times and registers
        cases.append((B, Bg, out, vec))
    for _, Bg, _, vec in cases:  # (a width that grows the split workspace makes the others register again)
        p(Bg), p(vec)
    for B, Bg, out, vec in cases:  # every width and the vector registered: all in C now
        ref = np.asarray(A @ B)
        before = launcher.fast_calls
        C = p(Bg)
        assert type(C) is type(Bg) and C.shape == (m, B.shape[1])
        _same(C, ref)
        assert p(Bg, out=out) is out
        _same(out, ref)
        v = p(vec)
        assert type(v) is type(Bg) and v.shape == (m,)
        _same(v, np.asarray(A @ B[:, 0]))
        assert launcher.fast_calls == before + 3
    # what the C call does not take still works, through Python, with the same answer
    B = cases[1][0]
    Bt = cases[1][1]
    strided = Bt.t().contiguous().t() if lib == "torch" else cp.asfortranarray(Bt)
    before = launcher.fast_calls
    _same(p(strided), np.asarray(A @ B))
    assert launcher.fast_calls == before
    assert m == k  # wiki-Vote: B and C have one shape, so out=B aliases
    with pytest.raises(ValueError, match="overlap"):
        p(Bt, out=Bt)
    with pytest.raises(ValueError, match="shape"):
        p(Bt, out=cases[2][2])
    p.close()
    with pytest.raises(RuntimeError, match="closed"):
        p(Bt)


def test_no_sync_and_no_allocation_in_steady_state(bundled_int):
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    B = torch.from_numpy(int_dense(k, 64, seed=3)).cuda()
    out = torch.empty(m, 64, device="cuda")
    p(B, out=out)
    p(B)
    torch.cuda.synchronize()
    free0 = accspmm.device_info()["free_memory"]
    alloc0 = torch.cuda.memory_allocated()
    torch.cuda.set_sync_debug_mode("error")
    try:
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time queued ahead of the calls
        t0 = time.perf_counter()
        for _ in range(200):
            p(B, out=out)
        host = time.perf_counter() - t0
        done_early = torch.cuda.current_stream().query()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert not done_early, "the calls waited for the GPU (a host synchronisation)"
    assert host < 0.05, f"200 calls took {host:.3f} s of host time while the GPU was busy"
    assert torch.cuda.memory_allocated() == alloc0
    assert free0 - accspmm.device_info()["free_memory"] < 2**20


@pytest.mark.parametrize("case", ["default", "splits", "half", "bsr16"])
def test_call_ordered_with_the_kernels_around_it(bundled_int, case):
    """On sm_90 the kernel is launched with programmatic dependent launch: its prologue may overlap
    the kernel before it.  B written by the kernel just before a call, C filled just before it and
    read just after it: every result is the exact product of its own B (a read of B or a write of C
    that overtook its neighbour would show as another B's product, or as NaN)."""
    if case == "splits":  # PACK tasks with leading empty windows, GROUP and multi-part SPLIT tasks
        A, kw = long_window_matrix(), {"reorder": "none", "tuning": {"cap": 2}}
    elif case in ("half", "bsr16"):  # the BitTCF kernel on half operands; the BSR16 kernel
        A, kw = bundled_int, {"precision": "fp16", "format": "bittcf" if case == "half" else "bsr16"}
    else:
        A, kw = bundled_int, {}
    m, k = A.shape
    n = 64
    p = accspmm.plan(A, device="gpu", **kw)
    dt = torch.float32 if case in ("default", "splits") else torch.float16
    Bs = [torch.from_numpy(int_dense(k, n, seed=s)).to("cuda", dt) for s in (11, 12, 13)]
    B = torch.empty(k, n, device="cuda", dtype=dt)
    C = torch.empty(m, n, device="cuda")  # float32 (a half plan's accumulator): exact sums
    p(Bs[0], out=C)
    torch.cuda.synchronize()
    outs = []
    for i in range(60):
        B.copy_(Bs[i % 3])
        C.fill_(float("nan"))
        p(B, out=C)
        outs.append(C.clone())
    torch.cuda.synchronize()
    refs = [np.asarray(A @ b.float().cpu().numpy()) for b in Bs]
    for i, out in enumerate(outs):
        _same(out, refs[i % 3])


def test_plan_freed_by_reference_count():
    """A used GPU plan sits in no reference cycle: dropping it frees its device memory at once, never
    later from the cyclic garbage collector (which could run inside a CUDA-graph capture, where
    cudaFree invalidates the capture: seen as a random failure of the capture test)."""
    import gc
    import weakref

    A = with_int_values(accspmm.datasets.load_bundled(np.float32), 3)
    gc.collect()
    gc.disable()
    try:
        for kwargs in ({}, {"precision": "fp32"}, {"reorder": "none", "tuning": {"cap": 2}}):
            p = accspmm.plan(A, device="gpu", **kwargs)
            p(torch.ones(A.shape[1], 40, device="cuda"))
            p(cp.ones((A.shape[1], 8), dtype=cp.float32))
            ref = weakref.ref(p)
            del p
            assert ref() is None, kwargs
    finally:
        gc.enable()


# ---- CUDA graphs ---------------------------------------------------------------------------

@pytest.mark.parametrize("cap, steps", [(None, False), (2, False), (2, True)])
def test_torch_graph_capture_replays_new_values(cap, steps):
    """Capture p(B, out=C) and p(B) (the result from the graph's pool); replay with new B values.
    cap=2 gives multi-part splits, whose workspace a capture must not allocate (the graph's own, sized
    for 16-column slices with narrow steps forced)."""
    A = long_window_matrix() if cap else with_int_values(accspmm.datasets.load_bundled(np.float32), 7)
    m, k = A.shape
    tuning = {"cap": cap, **({"slice_s": 0, "staged": 0, "depth": 2} if steps else {})}
    p = accspmm.plan(A, device="gpu", **({"reorder": "none", "tuning": tuning} if cap else {}))
    B = torch.from_numpy(int_dense(k, 96, seed=1)).cuda()
    C = torch.empty(m, 96, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as PyTorch's documentation asks
        p(B, out=C)
        p(B)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        p(B, out=C)
        C2 = p(B)
    for seed in (5, 6, 7):
        Bn = int_dense(k, 96, seed=seed)
        B.copy_(torch.from_numpy(Bn))
        C.fill_(float("nan"))
        C2.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = np.asarray(A @ Bn)
        _same(C, ref)
        _same(C2, ref)


def test_capture_before_warm_up_is_a_clear_error(bundled_int):
    p = accspmm.plan(bundled_int, device="gpu")
    B = torch.ones(bundled_int.shape[1], 24, device="cuda")
    assert_capture_needs_warm_up(lambda: p(B))
    p(B)  # outside a capture the first call works


def test_cupy_stream_capture(bundled_int):
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    B = cp.asarray(int_dense(k, 33, seed=2))
    C = cp.empty((m, 33), cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        p(B, out=C)
        s.synchronize()
        s.begin_capture()
        p(B, out=C)
        graph = s.end_capture()
    Bn = int_dense(k, 33, seed=9)
    B.set(Bn)
    C.fill(cp.nan)
    graph.launch(s)
    s.synchronize()
    _same(C, np.asarray(A @ Bn))


# ---- NaN / inf in B ------------------------------------------------------------------------

def _nonfinite_b(A, n, seed):
    """Integer B with inf, -inf and NaN placed (1) in rows of columns that one row of a window
    stores and its other rows do not (clear mask bits meet them), (2) in rows of a block's first
    column (padding slots repeat it), (3) in a few columns straddling the 32- and 64-column slice
    boundaries, (4) at random."""
    rng = np.random.default_rng(seed)
    k = A.shape[1]
    B = int_dense(k, n, seed=seed)
    cols = np.unique(A.indices)
    pick = rng.choice(cols, size=min(12, cols.size), replace=False) if cols.size else []
    specials = np.array([np.inf, -np.inf, np.nan], np.float32)
    for i, c in enumerate(pick):
        if i % 3 == 0:
            B[c, :] = specials[i % 3]  # the whole row
        elif i % 3 == 1:
            lo = 30 if n > 34 else 0
            B[c, lo:lo + 6] = specials[(i + 1) % 3]  # straddles column 32 (and 64 below)
            if n > 66:
                B[c, 62:67] = specials[(i + 2) % 3]
        else:
            B[c, rng.integers(0, n)] = specials[i % 3]
    hit = rng.random((k, n)) < 0.002
    B[hit] = rng.choice(specials, size=int(hit.sum()))
    return B


VARIANTS = [dict(slice_s=s, depth=d, staged=g, slice_major=o) for g in (0, 1) for s in (1, 2) for d in (2, 3)
            for o in (0, 1)]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "g{staged}s{slice_s}d{depth}o{slice_major}".format(**v))
def test_nonfinite_b_like_scipy_every_variant(bundled_int, variant):
    """PACK (caps 0, 8), GROUP (cap 256 on the 375-block window) and multi-part SPLIT (cap 2)
    tasks, every pipeline, both grid orders, 16-byte and 4-byte column paths."""
    for A in (bundled_int, long_window_matrix()):
        for cap in (0, 2, 8, 256):
            with accspmm.plan(A, device="gpu", reorder="none", tuning={"cap": cap, **variant}) as p:
                for n in (1, 33, 64, 130):
                    B = _nonfinite_b(A, n, seed=n + cap)
                    ref = np.asarray(A @ B)
                    assert not np.isfinite(ref).all()
                    out = cp.full((A.shape[0], n), cp.nan, cp.float32)
                    _same(p(cp.asarray(B), out=out), ref)


def test_nonfinite_b_default_plan_and_real_order(bundled_int):
    """The default plan (reordering, cost-model schedule, tuned variant): scipy's pattern in the
    original row order; finite B unchanged bit for bit; check_finite=True still raises."""
    A = bundled_int
    p = accspmm.plan(A, device="gpu")
    for n in (16, 128, 256):
        B = _nonfinite_b(A, n, seed=100 + n)
        _same(p(torch.from_numpy(B).cuda()), np.asarray(A @ B))
        _same(p(B), np.asarray(A @ B))  # host B: the same kernel
    with pytest.raises(ValueError, match="NaN or inf"):
        p(B, check_finite=True)


# ---- PyTorch op on CUDA ---------------------------------------------------------------------

def test_torch_autograd_cuda(bundled_int):
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    B = torch.from_numpy(int_dense(k, 40, seed=4)).cuda().requires_grad_()
    G = int_dense(m, 40, seed=5)
    C = p(B)
    assert C.requires_grad
    _same(C.detach(), np.asarray(A @ B.detach().cpu().numpy()))
    C.backward(torch.from_numpy(G).cuda())
    _same(B.grad, np.asarray(A.T @ G))
    assert p._T is not None and p._T.precision == "tf32"


def test_torch_compile_and_graph_of_training_step(bundled_int):
    """A two-layer step through the op under torch.compile(fullgraph=True) equals eager; the
    forward and backward of the op also capture into a CUDA graph and replay."""
    A = bundled_int
    m, k = A.shape
    assert m == k
    p = accspmm.plan(A, device="gpu")
    gen = torch.Generator().manual_seed(0)
    X = torch.randint(-2, 3, (k, 16), generator=gen).float().cuda()
    W = torch.randint(-2, 3, (16, 32), generator=gen).float().cuda().requires_grad_()

    def step(X):
        return p(torch.relu(p(X @ W))).sum()

    eager = step(X)
    eager.backward()
    g_eager, l_eager = W.grad.clone(), float(eager.detach())
    W.grad = None
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    lc = compiled(X)
    lc.backward()
    assert float(lc.detach()) == l_eager and torch.equal(W.grad, g_eager)
    W.grad = None
    del eager, lc  # no autograd graph (and no AccumulateGrad node of the default stream) outlives here
    Xs = X.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step(Xs).backward()
            W.grad = None
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss = step(Xs)
        loss.backward()
    W.grad.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert float(loss.detach()) == l_eager and torch.equal(W.grad, g_eager)


def test_results_of_the_c_call_own_their_memory(bundled_int, lib):
    """A result allocated by the C call (PyTorch's DLPack allocator, new_empty, or CuPy) stays valid
    and distinct while other results and allocations come and go."""
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    mk = (lambda x: torch.from_numpy(x).cuda()) if lib == "torch" else cp.asarray
    Bs = [int_dense(k, 48, seed=s) for s in range(4)]
    p(mk(Bs[0]))
    p(mk(Bs[0]))
    results = [p(mk(B)) for B in Bs]
    ptrs = {(r.data_ptr() if lib == "torch" else r.data.ptr) for r in results}
    assert len(ptrs) == len(results)
    for _ in range(20):  # churn the allocator
        junk = [p(mk(Bs[1])) for _ in range(5)]
        del junk
        tmp = mk(np.full((m, 48), 7.0, np.float32))
        del tmp
    for r, B in zip(results, Bs):
        _same(r, np.asarray(A @ B))
    if lib == "torch":  # and a dropped result gives its memory back at once
        B2 = mk(Bs[2])
        p(B2)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        for _ in range(100):
            p(B2)
        assert torch.cuda.memory_allocated() == base


def test_operator_under_cuda_graph_forward_and_backward(bundled_int):
    """torch.ops.accspmm.spmm itself (the route torch.compile takes) captured with its autograd:
    replays give A @ B and A^T @ G for new values."""
    A = bundled_int
    m, k = A.shape
    p = accspmm.plan(A, device="gpu")
    op = torch.ops.accspmm.spmm
    B = torch.from_numpy(int_dense(k, 40, seed=1)).cuda().requires_grad_()
    G = torch.from_numpy(int_dense(m, 40, seed=2)).cuda()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            op(B, p.handle, False).backward(G)
            B.grad = None
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        C = op(B, p.handle, False)
        C.backward(G)
    for seed in (3, 4):
        Bn, Gn = int_dense(k, 40, seed=seed), int_dense(m, 40, seed=seed + 10)
        with torch.no_grad():
            B.copy_(torch.from_numpy(Bn))
        G.copy_(torch.from_numpy(Gn))
        g.replay()
        torch.cuda.synchronize()
        _same(C.detach(), np.asarray(A @ Bn))
        _same(B.grad, np.asarray(A.T @ Gn))
