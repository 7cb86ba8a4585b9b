"""GPU runtime for the Python layer: availability, device memory, GPU-array interop, cuSPARSE loading.

``accspmm._cuda`` is optional: it exists only when the package was built with nvcc, and
works only with a driver and a device.  Everything here degrades to a clear reason string.
"""

from __future__ import annotations

import glob
import math
import os
import sys
import threading

import numpy as np

_lock = threading.Lock()
_probe_cache = None


def _cuda_module():
    try:
        from . import _cuda  # noqa: F401
    except ImportError as exc:
        return None, f"accspmm was built without CUDA support ({exc}); reinstall with nvcc on PATH"
    return _cuda, ""


def probe():
    """(available: bool, reason: str, info: dict) -- cached after the first call."""
    global _probe_cache
    if _probe_cache is not None:  # every plan asks (twice): no lock once known
        return _probe_cache
    with _lock:
        if _probe_cache is None:
            mod, reason = _cuda_module()
            if mod is None:
                _probe_cache = (False, reason, {})
            else:
                info = mod.probe()
                if info["status"] != 0:
                    _probe_cache = (False, f"no usable CUDA device: {info['message']}", info)
                else:
                    _probe_cache = (True, "", info)
        return _probe_cache


def cuda_available() -> bool:
    """True when the CUDA extension is built and a CUDA device is usable."""
    return probe()[0]


def cuda_status() -> str:
    """Why CUDA is unavailable ('' when it is available)."""
    return probe()[1]


def require_cuda():
    if _CU is not None:  # found usable before (_cuda_for_arrays)
        return _CU
    ok, reason, _ = probe()
    if not ok:
        raise RuntimeError(f"device='gpu' requested but CUDA is unavailable: {reason}")
    from . import _cuda

    return _cuda


def device_info(device: int | None = None) -> dict:
    """Name, compute capability, SM count, L2 size and memory of a CUDA device."""
    cu = require_cuda()
    return cu.device_info(cu.get_device() if device is None else int(device))


# ---- device memory ------------------------------------------------------------------------

_CU = None
#: Host arrays of at least this many bytes get their pages mapped by the C core's threads before a
#: device-to-host copy overwrites them (a copy into fresh, unmapped pages ran at 3 GB/s on the GPU
#: machine, 10 GB/s into mapped ones; mapping 256 MB on 16 threads took 5.5 ms).
PREFAULT_BYTES = 1 << 22


def _cuda_for_arrays():
    """accspmm._cuda once CUDA was found usable (require_cuda's probe takes a lock: ~10 us a call)."""
    global _CU
    if _CU is None:
        _CU = require_cuda()
    return _CU


class DeviceView:
    """Bytes ``offset`` .. ``offset + nbytes`` of a DeviceArray, which owns the allocation (kept alive here)
    and frees it; ``free()`` forgets the view only."""

    __slots__ = ("ptr", "nbytes", "owner")

    def __init__(self, owner: "DeviceArray", offset: int, nbytes: int):
        self.owner = owner
        self.ptr = owner.ptr + int(offset)
        self.nbytes = int(nbytes)

    def free(self):
        self.ptr = 0
        self.owner = None


class DeviceArray:
    """A device allocation owned by Python (freed on free()/garbage collection)."""

    __slots__ = ("ptr", "nbytes", "shape", "dtype", "device", "__weakref__")

    def __init__(self, shape, dtype, device: int, adopt: int | None = None):
        """Allocates shape x dtype on ``device``, or with ``adopt`` takes ownership of that device
        address (one the CUDA layer allocated for this shape and dtype; 0: none yet, the caller
        sets ``ptr``)."""
        cu = _cuda_for_arrays()
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize  # np.prod costs ~15 us a call
        self.ptr = 0
        self.ptr = cu.malloc(self.nbytes) if adopt is None else int(adopt)

    @classmethod
    def from_host(cls, arr: np.ndarray, device: int, stream=None) -> "DeviceArray":
        arr = np.ascontiguousarray(arr)
        d = cls(arr.shape, arr.dtype, device)
        from . import _cuda

        _cuda.memcpy_htod(d.ptr, arr, stream)
        return d

    @classmethod
    def ordered(cls, shape, dtype, device: int, stream) -> "DeviceArray":
        """Allocates in the order of ``stream`` (None: the legacy default stream) without waiting:
        work on ``stream`` may use it at once, anything else once the stream has passed this point
        (the caller synchronises it, or waits for later work of it)."""
        d = cls(shape, dtype, device, adopt=0)
        d.ptr = _cuda_for_arrays().malloc_ordered(d.nbytes, stream)
        return d

    @classmethod
    def upload(cls, arr: np.ndarray, device: int, stream) -> "DeviceArray":
        """A copy of ``arr`` made in the order of ``stream`` (``ordered``'s rules), through the
        library's pinned staging: the call does not wait for the copy, and ``arr`` may go at once."""
        arr = np.ascontiguousarray(arr)
        d = cls(arr.shape, arr.dtype, device, adopt=0)
        d.ptr = _cuda_for_arrays().upload(arr, stream)
        return d

    def to_host(self, out: np.ndarray | None = None, stream=None) -> np.ndarray:
        from . import _core, _cuda

        if out is None:
            out = np.empty(self.shape, self.dtype)
        if out.nbytes >= PREFAULT_BYTES and out.flags.c_contiguous and out.flags.writeable:
            _core.prefault(out)  # its pages mapped by the core's threads, not one by one by the copy
        _cuda.memcpy_dtoh(out, self.ptr, stream)  # which overwrites every byte
        return out

    def free(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            try:
                from . import _cuda

                _cuda.free(ptr)
            except Exception:  # interpreter shutdown: the driver frees it with the context
                pass

    def __del__(self):
        self.free()


class HostSlot:
    """1 KiB of mapped pinned host memory (``_cuda.host_slot``) that a kernel queued on ``stream``
    writes to directly, at the same address: the host reads a few results without a copy.  ``read``
    waits for ``stream``; ``free`` (also on garbage collection) waits for it too unless read since,
    so that no kernel still writes a slot that another user has taken."""

    __slots__ = ("ptr", "stream", "pending", "__weakref__")

    def __init__(self, stream):
        self.ptr = 0
        self.ptr = _cuda_for_arrays().host_slot()
        self.stream = stream
        self.pending = True

    @classmethod
    def try_new(cls, stream):
        """A slot, or None where the device has no unified addressing or no pinned memory is left
        (the caller copies instead)."""
        try:
            return cls(stream)
        except (NotImplementedError, MemoryError):
            return None

    def read(self, count: int) -> list:
        """The slot's first ``count`` int64, once ``stream`` has finished."""
        from . import _cuda

        if self.pending:
            _cuda.synchronize(self.stream)
            self.pending = False
        return _cuda.host_slot_read(self.ptr, count)

    def free(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            try:
                from . import _cuda

                if self.pending:
                    _cuda.synchronize(self.stream)
                _cuda.host_slot_free(ptr)
            except Exception:  # interpreter shutdown: the driver frees it with the context
                pass

    def __del__(self):
        self.free()


# ---- GPU arrays of other libraries ----------------------------------------------------------

_TORCH_MAPS = None


def torch_dtype_maps() -> tuple:
    """(torch dtype -> NumPy dtype, NumPy dtype -> torch dtype) for the torch dtypes NumPy has (the
    ones whose __cuda_array_interface__ NumPy reads); built at first use, when torch is loaded."""
    global _TORCH_MAPS
    if _TORCH_MAPS is None:
        import torch

        names = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                 "complex64", "complex128")
        to_torch = {np.dtype(n): getattr(torch, n) for n in names}
        _TORCH_MAPS = ({t: d for d, t in to_torch.items()}, to_torch)
    return _TORCH_MAPS


class ForeignArray:
    """A CUDA array of CuPy / PyTorch / Numba seen through __cuda_array_interface__ (no copy).  A
    PyTorch tensor of a dtype NumPy has is read from its own attributes instead: the same pointer,
    shape, dtype and contiguity (torch's __cuda_array_interface__ is a Python property that builds a
    dict, about 10 us a call on the GPU machine's host; first calls make two)."""

    __slots__ = ("obj", "ptr", "shape", "dtype", "c_contiguous", "stream", "kind")

    def __init__(self, obj):
        if type(obj).__module__ == "torch":
            dt = torch_dtype_maps()[0].get(obj.dtype)
            if dt is not None and obj.is_cuda and not (obj.requires_grad or obj.is_neg() or obj.is_conj()):
                self.obj, self.kind, self.stream = obj, "torch", None
                self.ptr = int(obj.data_ptr())
                self.shape = tuple(obj.shape)
                self.dtype = dt
                self.c_contiguous = obj.is_contiguous()
                return
        cai = obj.__cuda_array_interface__
        self.obj = obj
        self.ptr = int(cai["data"][0])
        self.shape = tuple(int(s) for s in cai["shape"])
        self.dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        contiguous = strides is None
        if strides is not None:
            expect, ok = self.dtype.itemsize, True
            for dim, stride in zip(reversed(self.shape), reversed(strides)):
                if dim > 1 and stride != expect:
                    ok = False
                expect *= dim
            contiguous = ok
        self.c_contiguous = contiguous
        self.stream = cai.get("stream")
        mod = type(obj).__module__.split(".")[0]
        self.kind = mod if mod in ("cupy", "torch") else "other"

    @property
    def device(self) -> int:
        if self.kind == "torch":
            return int(self.obj.device.index or 0)
        if self.kind == "cupy":
            return int(self.obj.device.id)
        from . import _cuda

        return _cuda.get_device()

    def contiguous(self) -> "ForeignArray":
        if self.c_contiguous:
            return self
        if self.kind == "torch":
            return ForeignArray(self.obj.contiguous())
        if self.kind == "cupy":
            import cupy

            return ForeignArray(cupy.ascontiguousarray(self.obj))
        raise ValueError("B is a non-contiguous GPU array of an unknown library; pass a C-contiguous one")

    def cast(self, dtype) -> "ForeignArray":
        dtype = np.dtype(dtype)
        if self.dtype == dtype:
            return self
        if self.kind == "torch":
            import torch

            return ForeignArray(self.obj.to(getattr(torch, dtype.name)))
        if self.kind == "cupy":
            return ForeignArray(self.obj.astype(dtype))
        raise TypeError(f"B has dtype {self.dtype}; expected {dtype}")

    def empty_like_kind(self, shape, dtype) -> "ForeignArray":
        """A new uninitialised array of the same library, device and dtype."""
        if self.kind == "torch":
            import torch

            td = torch_dtype_maps()[1].get(np.dtype(dtype)) or getattr(torch, np.dtype(dtype).name)
            return ForeignArray(self.obj.new_empty(shape, dtype=td))
        if self.kind == "cupy":
            import cupy

            with cupy.cuda.Device(self.device):
                return ForeignArray(cupy.empty(shape, dtype=dtype))
        raise TypeError("out= is required for GPU arrays of libraries other than CuPy and PyTorch")

    def default_stream(self):
        """The library's current stream on this array's device (as an int handle), or None."""
        if self.kind == "torch":
            import torch

            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.compile's code calls
            if raw is not None:
                return int(raw(self.obj.device.index)) or None
            return int(torch.cuda.current_stream(self.obj.device).cuda_stream) or None
        if self.kind == "cupy":
            import cupy

            with cupy.cuda.Device(self.device):
                return int(cupy.cuda.get_current_stream().ptr) or None
        return None


_interop_done = set()


def array_library(obj) -> str | None:
    """"torch" for a torch.Tensor, "cupy" for a cupy.ndarray, else None (neither is imported here)."""
    for lib, attr in (("torch", "Tensor"), ("cupy", "ndarray")):
        mod = sys.modules.get(lib)
        if mod is not None and isinstance(obj, getattr(mod, attr, ())):
            return lib
    return None


def register_interop(lib: str) -> None:
    """Hands the library's array type, dtype and current-stream getter to the C fast call
    (csrc/cuda_launcher.c), once per process; only for libraries the caller already uses."""
    if lib in _interop_done or not cuda_available():
        return
    from . import _cuda

    with _lock:
        if lib == "torch":
            import torch

            if not hasattr(torch._C, "_cuda_getCurrentRawStream"):  # a CPU-only PyTorch: Python takes the calls
                return
            api = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
            if os.environ.get("ACCSPMM_NO_DLPACK_API"):  # the attribute route, for tests and A/B timing
                api = None
            _cuda.set_interop("torch", torch.Tensor, torch.float32, torch._C._cuda_getCurrentRawStream, api)
        elif lib == "cupy":
            import cupy

            getter = getattr(cupy.cuda.stream, "get_current_stream_ptr", None)
            if getter is None:
                def getter():
                    return cupy.cuda.get_current_stream().ptr
            _cuda.set_interop("cupy", cupy.ndarray, getter, np.dtype(np.float32))
        else:
            raise ValueError(f"unknown array library {lib!r}")
        _interop_done.add(lib)


def stream_handle(stream):
    """cudaStream_t as int (None = legacy default stream) from a CuPy/PyTorch stream or an int."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr)) or None
    if isinstance(stream, int):
        return stream or None
    raise TypeError(f"stream must be a CuPy or PyTorch stream, an int handle or None, got {type(stream).__name__}")


# ---- cuSPARSE ---------------------------------------------------------------------------

_cusparse_loaded = False


def _cusparse_candidates():
    env = os.environ.get("ACCSPMM_CUSPARSE_LIBRARY")
    if env:
        yield env
    yield "libcusparse.so.12"
    for root in sys.path:  # the nvidia-cusparse wheel (as installed with PyTorch)
        yield from sorted(glob.glob(os.path.join(root, "nvidia", "cusparse", "lib", "libcusparse.so.*")))
        yield from sorted(glob.glob(os.path.join(root, "nvidia", "cu*", "lib", "libcusparse.so.*")))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            yield from sorted(glob.glob(os.path.join(home, "lib64", "libcusparse.so.*")))
            yield from sorted(glob.glob(os.path.join(home, "targets", "*", "lib", "libcusparse.so.*")))
    yield "libcusparse.so"


def load_cusparse():
    """Loads libcusparse once (dlopen); RuntimeError listing what was tried otherwise."""
    global _cusparse_loaded
    cu = require_cuda()
    with _lock:
        if _cusparse_loaded:
            return cu
        errors = []
        for path in _cusparse_candidates():
            try:
                cu.cusparse_load(path)
                _cusparse_loaded = True
                return cu
            except RuntimeError as exc:
                errors.append(str(exc))
        raise RuntimeError("cuSPARSE could not be loaded; set ACCSPMM_CUSPARSE_LIBRARY. Tried:\n  "
                           + "\n  ".join(errors[-6:]))
