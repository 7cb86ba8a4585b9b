"""PyTorch integration on the CPU path (runs in CI, which has no GPU): tensors in and out,
torch.ops.accspmm.spmm with autograd (gradcheck in float64, double backward), its fake kernel
(torch.library.opcheck, torch.compile(fullgraph=True)), a short training loop, clear errors for
half precisions and for out= with autograd, and `import accspmm` without importing torch.
The same op on CUDA (autograd, compile, CUDA graphs) is in test_gpu_call.py."""

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from conftest import REPO, int_dense, with_int_values

torch = pytest.importorskip("torch")


def _small(dtype=np.float64, seed=0, shape=(30, 20)):
    return with_int_values(sp.random(*shape, density=0.2, format="csr", random_state=seed), seed, dtype)


def test_import_accspmm_does_not_import_torch():
    code = "import sys, accspmm; accspmm.spmm(accspmm.datasets.load_bundled(), [[1.0]] * 8298); " \
           "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["csr", "bittcf"])
def test_cpu_tensors_in_and_out_exact(dtype, fmt):
    A = _small(dtype, shape=(37, 29))
    p = accspmm.plan(A, device="cpu", format=fmt)
    for n in (1, 5, 33):
        B = int_dense(29, n, seed=n, dtype=dtype)
        ref = A @ B
        C = p(torch.from_numpy(B))
        assert isinstance(C, torch.Tensor) and C.dtype == torch.from_numpy(ref).dtype
        np.testing.assert_array_equal(C.numpy(), ref)
        out = torch.full((37, n), float("nan"), dtype=C.dtype)
        assert p(torch.from_numpy(B), out=out) is out
        np.testing.assert_array_equal(out.numpy(), ref)
        v = p(torch.from_numpy(B[:, 0].copy()))
        assert v.shape == (37,)
        np.testing.assert_array_equal(v.numpy(), ref[:, 0])
    Bt = torch.from_numpy(int_dense(33, 29, seed=3, dtype=dtype)).t()  # a transposed view
    np.testing.assert_array_equal(p(Bt).numpy(), A @ Bt.numpy())
    np.testing.assert_array_equal(accspmm.spmm(A, Bt, device="cpu").numpy(), A @ Bt.numpy())


def test_autograd_gradcheck_and_double_backward():
    A = _small()
    p = accspmm.plan(A, device="cpu")
    B = torch.randn(20, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: p(x), (B,))
    assert torch.autograd.gradgradcheck(lambda x: p(x), (B,))
    v = torch.randn(20, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: p(x), (v,))
    C = p(B)
    G = torch.from_numpy(int_dense(30, 3, seed=7, dtype=np.float64))
    C.backward(G)
    np.testing.assert_array_equal(B.grad.numpy(), A.T @ G.numpy())  # dL/dB = A^T dL/dC, exactly here
    assert p.transposed() is p._T and p._T.shape == (20, 30)


def test_autograd_through_one_shot_spmm_outlives_the_call():
    A = _small()
    B = torch.randn(20, 4, dtype=torch.float64, requires_grad=True)
    C = accspmm.spmm(A, B, device="cpu")
    import gc

    gc.collect()  # the autograd graph holds the plan
    C.sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), A.T @ np.ones((30, 4)), rtol=1e-12)


def test_opcheck():
    p = accspmm.plan(_small(), device="cpu")
    for transpose, rows in ((False, 20), (True, 30)):
        B = torch.randn(rows, 4, dtype=torch.float64, requires_grad=True)
        torch.library.opcheck(torch.ops.accspmm.spmm.default, (B, p.handle, transpose))
    torch.library.opcheck(torch.ops.accspmm.spmm.default, (torch.randn(20, dtype=torch.float64), p.handle, False))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend):
    A = _small()
    p = accspmm.plan(A, device="cpu")
    W = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)

    def f(X):
        return p(torch.relu(p.transposed()(p(X @ W)))).sum()

    X = torch.randn(20, 8, dtype=torch.float64)
    eager = f(X)
    eager.backward()
    g = W.grad.clone()
    W.grad = None
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    out = compiled(X)
    out.backward()
    torch.testing.assert_close(out, eager)
    torch.testing.assert_close(W.grad, g)


def test_training_loop_learns():
    """A two-layer GCN-style model on a ring graph fits a smooth target; the loss falls 10x."""
    n = 60
    ring = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(n, n), format="lil")
    ring[0, n - 1] = ring[n - 1, 0] = 1.0
    A = sp.csr_matrix(ring / 3.0)
    p = accspmm.plan(A, device="cpu", dtype=np.float32)
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(n, 8, generator=gen)
    y = torch.sin(torch.linspace(0, 6.28, n)).unsqueeze(1)
    W1 = (torch.randn(8, 16, generator=gen) / 3).requires_grad_()
    W2 = (torch.randn(16, 1, generator=gen) / 4).requires_grad_()
    opt = torch.optim.Adam([W1, W2], lr=0.02)
    losses = []
    for _ in range(200):
        opt.zero_grad()
        loss = ((p(torch.relu(p(X @ W1)) @ W2) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])


def test_errors():
    p = accspmm.plan(_small(np.float32), device="cpu")
    for dt in (torch.float16, torch.bfloat16):
        with pytest.raises(TypeError, match="float16, but this plan computes in float32.*precision='fp16' or 'bf16'"):
            p(torch.ones(20, 3, dtype=dt))
    with pytest.raises(TypeError, match="this plan computes in float32"):
        p(np.ones((20, 3), np.float16))
    B = torch.ones(20, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        p(B, out=torch.empty(30, 3))
    with pytest.raises(ValueError, match="dimension mismatch"):
        p(torch.ones(21, 3))
    with pytest.raises(TypeError, match="out must be a torch.Tensor"):
        p(torch.ones(20, 3), out=np.empty((30, 3), np.float32))
    with pytest.raises(RuntimeError, match="closed"):
        h = p.handle
        p.close()
        torch.ops.accspmm.spmm(torch.ones(20, 3), h, False)
    Bw = torch.ones(20, 3)
    before = Bw.clone()
    with pytest.raises(ValueError):
        accspmm.plan(_small(np.float32), device="cpu")(Bw, out=torch.empty(31, 3))
    assert torch.equal(Bw, before)
