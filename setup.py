"""Build of accspmm: the C core extension always, the CUDA extension when nvcc is found.

Environment variables
---------------------
ACCSPMM_CUDA        unset/auto: build accspmm._cuda when nvcc is found (a failed CUDA
                    build then only warns); 1/on: required (no nvcc or a failed compile
                    fails the build loudly); 0/off: never build it.
ACCSPMM_CUDA_ARCHS  semicolon list of SM versions, default "80;90": machine code for each
                    plus PTX of the highest for forward compatibility. e.g. "90" in CI.
CUDA_HOME           toolkit root (else the directory of nvcc on PATH, else /usr/local/cuda).
ACCSPMM_OPENMP      0 disables OpenMP (on by default when the compiler supports it).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _rel(pattern):
    return sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))


CORE_SOURCES = _rel("csrc/acc_*.c") + ["csrc/glue.c", "csrc/core_module.c"]
CUDA_C_SOURCES = ["csrc/cuda_module.c", "csrc/cuda_launcher.c", "csrc/cuda_spgemm.c", "csrc/glue.c",
                  "csrc/acc_status_string.c"]
CUDA_CU_SOURCES = _rel("cuda/*.cu")
OPENMP_CU = ["cuda/staging.cu"]
HEADERS = _rel("csrc/*.h") + _rel("cuda/*.h")  # a changed header rebuilds the C sources too
# Hidden symbols: the extensions export PyInit_* only.  Exported, the C core's names bound to the first
# definition in the process: torch's libgomp (loaded first when torch is imported first) defines
# OpenACC's acc_malloc(size_t) and acc_free, which took over the core's allocator and corrupted the heap.
C_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unknown-pragmas",
           "-fvisibility=hidden"]


def _cuda_mode():
    value = os.environ.get("ACCSPMM_CUDA", "auto").strip().lower()
    if value in ("0", "off", "false", "no"):
        return "off"
    if value in ("1", "on", "true", "yes", "force"):
        return "force"
    return "auto"


def _find_nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [os.path.join(home, "bin", "nvcc")] if home else []
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.realpath(path)
    return None


def _cuda_libdir(cuda_home):
    for sub in ("lib64", os.path.join("targets", "x86_64-linux", "lib"), "lib"):
        d = os.path.join(cuda_home, sub)
        if os.path.exists(os.path.join(d, "libcudart_static.a")):
            return d
    return os.path.join(cuda_home, "lib64")


#: sources with Hopper-only instructions (wgmma): built for sm_90a where the list has 90, with no PTX
#: (sm_90a code runs on compute capability 9.0 only; elsewhere their kernels are empty and unused)
ARCH_SPECIFIC_CU = {os.path.join("cuda", "half_wgmma.cu")}


def _gencode_flags(src=None):
    archs = [a.strip() for a in os.environ.get("ACCSPMM_CUDA_ARCHS", "80;90").replace(",", ";").split(";")]
    archs = [a for a in archs if a]
    if not archs or not all(a.rstrip("a").isdigit() for a in archs):
        raise SystemExit(f"ACCSPMM_CUDA_ARCHS must be a list like '80;90', got {archs!r}")
    if src in ARCH_SPECIFIC_CU:
        return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in
                dict.fromkeys("90a" if a.rstrip("a") == "90" else a for a in archs)]
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    top = max(archs, key=lambda a: int(a.rstrip("a")))
    flags.append(f"-gencode=arch=compute_{top.rstrip('a')},code=compute_{top.rstrip('a')}")
    return flags


class BuildExt(build_ext):
    """Adds OpenMP when available and compiles cuda/*.cu with nvcc for accspmm._cuda."""

    def _has_flag(self, flag):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "t.c")
            with open(src, "w") as f:
                f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
            try:
                self.compiler.compile([src], output_dir=tmp, extra_postargs=[flag])
                return True
            except Exception:
                return False

    def build_extensions(self):
        openmp = self._openmp = os.environ.get("ACCSPMM_OPENMP", "1") != "0" and self._has_flag("-fopenmp")
        if not openmp:
            print("accspmm: building without OpenMP (the CPU path runs on one thread)")
        for ext in self.extensions:
            if openmp:
                ext.extra_compile_args.append("-fopenmp")
                ext.extra_link_args.append("-fopenmp")
        cuda_ext = [e for e in self.extensions if e.name == "accspmm._cuda"]
        if cuda_ext and not self._prepare_cuda(cuda_ext[0]):
            self.extensions.remove(cuda_ext[0])
        super().build_extensions()

    def _stale(self, obj, src, cmd):
        """True unless `obj` was built by the same command and is newer than `src` and every header."""
        try:
            with open(obj + ".cmd") as f:
                same = f.read() == " ".join(cmd)
            built = os.path.getmtime(obj)
        except OSError:
            return True
        newest = max(os.path.getmtime(os.path.join(HERE, p)) for p in [src, *HEADERS])
        return self.force or not same or newest > built

    def _prepare_cuda(self, ext):
        mode = _cuda_mode()
        nvcc = _find_nvcc()
        if nvcc is None:
            if mode == "force":
                raise SystemExit("ACCSPMM_CUDA=1 but nvcc was not found (set CUDA_HOME or PATH)")
            print("accspmm: nvcc not found; building the CPU-only package")
            return False
        cuda_home = os.path.dirname(os.path.dirname(nvcc))
        objects = []
        try:
            os.makedirs(self.build_temp, exist_ok=True)
            for src in CUDA_CU_SOURCES:
                obj = os.path.join(self.build_temp, os.path.basename(src) + ".o")
                # host OpenMP where a .cu uses it (staging.cu's copies into pinned memory)
                host = "-fPIC,-fvisibility=hidden" + (",-fopenmp" if src in OPENMP_CU and self._openmp else "")
                cmd = [nvcc, "-std=c++17", "-O3", "-Xcompiler", host, "-lineinfo",
                       "--expt-relaxed-constexpr", *_gencode_flags(src), "-c", src, "-o", obj]
                if not self._stale(obj, src, cmd):
                    print(f"accspmm: {obj} is up to date")
                else:
                    print(" ".join(cmd))
                    subprocess.run(cmd, check=True, cwd=HERE)
                    with open(obj + ".cmd", "w") as f:
                        f.write(" ".join(cmd))
                objects.append(obj)
        except (subprocess.CalledProcessError, OSError) as exc:
            if mode == "force":
                raise SystemExit(f"accspmm: CUDA compile failed with ACCSPMM_CUDA=1: {exc}")
            print(f"accspmm: WARNING: CUDA compile failed ({exc}); building the CPU-only package")
            return False
        ext.extra_objects.extend(objects)
        ext.depends = [*ext.depends, *objects]  # relink when an object is newer than the extension (a .cu changed)
        ext.include_dirs.append(os.path.join(cuda_home, "include"))
        ext.library_dirs.append(_cuda_libdir(cuda_home))
        # Static CUDA runtime: the extension needs only the driver at run time;
        # cuSPARSE is dlopen'ed on first use.
        ext.libraries.extend(["cudart_static", "dl", "rt", "pthread", "stdc++"])
        return True


extensions = [
    Extension("accspmm._core", sources=CORE_SOURCES, include_dirs=["csrc", numpy.get_include()],
              extra_compile_args=list(C_FLAGS), depends=HEADERS),
]
if _cuda_mode() != "off":
    extensions.append(
        Extension("accspmm._cuda", sources=CUDA_C_SOURCES, include_dirs=["csrc", "cuda", numpy.get_include()],
                  extra_compile_args=list(C_FLAGS), depends=HEADERS)
    )

setup(ext_modules=extensions, cmdclass={"build_ext": BuildExt})
