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
