"""Import without CUDA, the availability report, and the demo command."""

import subprocess
import sys

import accspmm


def test_cuda_status_is_consistent():
    ok = accspmm.cuda_available()
    reason = accspmm.cuda_status()
    assert isinstance(ok, bool)
    assert (reason == "") == ok


def test_import_without_cuda_extension():
    """A CPU-only build: the CUDA module missing must not break import or the CPU path."""
    code = (
        "import sys; sys.modules['accspmm._cuda'] = None\n"
        "import numpy as np, scipy.sparse as sp, accspmm\n"
        "assert accspmm.cuda_available() is False\n"
        "assert 'without CUDA' in accspmm.cuda_status(), accspmm.cuda_status()\n"
        "A = sp.csr_matrix(np.eye(3, dtype=np.float32))\n"
        "assert (accspmm.spmm(A, np.ones((3, 2), np.float32)) == 1).all()\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_demo_runs():
    res = subprocess.run([sys.executable, "-m", "accspmm", "demo", "-n", "16", "--repeat", "2"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "result  OK" in res.stdout
    assert "MeanNNZTC" in res.stdout


def test_extensions_export_only_their_init():
    """The C core's functions are hidden: exported, they bound to the first definition in the
    process, and torch's libgomp (loaded first when torch is imported first) defines OpenACC's
    acc_malloc(size_t)/acc_free, which took over the core's two-argument allocator."""
    import ctypes
    import importlib

    for name in ("_core", "_cuda"):
        try:
            mod = importlib.import_module(f"accspmm.{name}")
        except ImportError:
            continue  # a CPU-only build has no _cuda
        lib = ctypes.CDLL(mod.__file__)
        assert hasattr(lib, f"PyInit_{name}")
        for sym in ("acc_mem_alloc", "acc_csr_check", "acc_py_array", "acc_status_string", "acc_cuda_malloc"):
            assert not hasattr(lib, sym), f"{name} exports {sym}"


def test_core_after_torch_import():
    """torch imported first (its libgomp in the global scope), then the C core's builders: the same
    BitTCF as without torch, and no heap corruption (the process used to abort here)."""
    import pytest

    pytest.importorskip("torch")
    code = (
        "import sys\n"
        "if sys.argv[1] == 'torch': import torch\n"
        "import hashlib, numpy as np, scipy.sparse as sp, accspmm\n"
        "rng = np.random.default_rng(0)\n"
        "m, nnz = 20_000, 200_000\n"
        "cols = (np.minimum((rng.pareto(1.2, nnz) * 50).astype(np.int64), m - 1) * 2654435761) % m\n"
        "A = sp.csr_matrix((np.ones(nnz, np.float32), (rng.integers(0, m, nnz), cols)), shape=(m, m))\n"
        "h = hashlib.sha256()\n"
        "for method in ('none', 'affinity', 'rcm', 'degree', 'jaccard'):\n"
        "    f = accspmm.BitTCF.from_csr(A, accspmm.reorder(A, method))\n"
        "    for a in (f.perm, f.window_offsets, f.block_cols, f.block_mask, f.values):\n"
        "        h.update(np.ascontiguousarray(a).tobytes())\n"
        "print(h.hexdigest())\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True) for arg in ("", "torch")]
    for res in runs:
        assert res.returncode == 0, res.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
