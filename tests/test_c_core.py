"""Builds tests/c/test_core.c against the C core with AddressSanitizer + UBSan (and plain, under
valgrind when it is installed) and runs it: memory errors, undefined behaviour, leaks and every
out-of-memory path of the core."""

import glob
import os
import shutil
import subprocess

import pytest

from conftest import REPO

CC = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
SOURCES = sorted(glob.glob(os.path.join(REPO, "csrc", "acc_*.c")))
DRIVER = os.path.join(REPO, "tests", "c", "test_core.c")

pytestmark = pytest.mark.skipif(CC is None or not SOURCES, reason="no C compiler or no csrc/ sources")


def _build(tmp_path, name, flags):
    exe = str(tmp_path / name)
    cmd = [CC, "-std=c11", "-g", "-fopenmp", f"-I{os.path.join(REPO, 'csrc')}", *flags, DRIVER, *SOURCES, "-o", exe, "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return exe


def test_core_under_asan_ubsan(tmp_path):
    exe = _build(tmp_path, "test_core_asan", ["-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                                              "-fno-sanitize-recover=all"])
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    res = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all checks passed" in res.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_core_under_valgrind(tmp_path):
    exe = _build(tmp_path, "test_core_plain", ["-O1"])
    env = dict(os.environ, OMP_NUM_THREADS="2")
    res = subprocess.run(["valgrind", "--error-exitcode=3", "--leak-check=full", "--errors-for-leak-kinds=definite",
                          "--quiet", exe], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "all checks passed" in res.stdout
