"""The GPU SpGEMM's Python side (cuda/spgemm.cu): operands on the device, the analysis, results in
the caller's array library (CuPy arrays for CuPy operands, NumPy after a copy for scipy ones).

Policy only: which index width, which dtype, where the result lives; the work is one C call per
phase (``_cuda.spgemm_analyse``, ``spgemm_numeric``, ``spgemm_compact``).
"""

from __future__ import annotations

import time

import numpy as np

from ._device import DeviceArray, require_cuda
from ._validate import INT32_MAX

PATHS = {"model": 0, "tensor": 1, "scalar": 2}
ALGORITHMS = {"auto": 0, "tiles": 1, "rows": 2}
_DTYPE_CODE = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}


class DeviceOperand:
    """A CSR on the device: CuPy arrays used in place, or a validated scipy CSR uploaded.

    ``bits``: the index width of both index arrays (32 or 64).  ``values(dtype)`` gives a device
    address of the values in ``dtype`` (converted on the device when needed, kept alive here)."""

    def __init__(self, shape, indptr, indices, data, bits, keep, device, canonical=-1):
        self.shape = shape
        self.canonical = canonical  # 1 sorted rows without duplicates, 0 not, -1 unknown
        self.nnz = int(indices.shape[0])
        self.indptr, self.indices, self.data = indptr, indices, data
        self.bits = bits
        self._keep = keep  # the objects that own the addresses
        self.device = device

    @classmethod
    def from_host(cls, csr, bits: int, device: int, dtype):
        """Uploads a validated host CSR (accspmm._validate.CSR) with `bits`-wide indices and its
        values in `dtype`."""
        it = np.int32 if bits == 32 else np.int64
        ip = DeviceArray.from_host(csr.indptr.astype(it, copy=False), device)
        ix = DeviceArray.from_host(csr.indices.astype(it, copy=False), device)
        dv = DeviceArray.from_host(csr.data.astype(dtype, copy=False), device)
        op = cls(csr.shape, ip, ix, dv, bits, (ip, ix, dv), device, int(bool(csr.canonical)))
        op.dtype = np.dtype(dtype)
        return op

    @classmethod
    def from_cupy(cls, M):
        """A CuPy CSR matrix as it is (int32 indices)."""
        op = cls(tuple(int(s) for s in M.shape), M.indptr, M.indices, M.data, 32, (M,), int(M.data.device.id))
        op.dtype = np.dtype(M.data.dtype)
        return op

    @staticmethod
    def address(arr) -> int:
        if isinstance(arr, DeviceArray):
            return arr.ptr
        return int(arr.data.ptr)  # a CuPy array

    def csr6(self):
        m, k = self.shape
        return (m, k, self.nnz, self.address(self.indptr), self.address(self.indices), self.bits, self.canonical)

    def values_address(self, data, dtype, stream):
        """Device address of `data` (this operand's values, or new ones) as `dtype`, and the array
        that keeps it alive."""
        dtype = np.dtype(dtype)
        if isinstance(data, np.ndarray):  # host values: upload in dtype
            d = DeviceArray.from_host(np.ascontiguousarray(data, dtype=dtype), self.device, stream)
            return d.ptr, d
        if isinstance(data, DeviceArray):
            if data.dtype == dtype:
                return data.ptr, data
            raise TypeError("internal: a device value array of another dtype")
        arr = data if np.dtype(data.dtype) == dtype else data.astype(dtype)  # CuPy, on its stream
        if not arr.flags.c_contiguous:
            import cupy

            arr = cupy.ascontiguousarray(arr)
        return int(arr.data.ptr), arr


class DeviceProduct:
    """The symbolic phase of ``A @ B`` on the GPU (a capsule of cuda/spgemm.cu) and its numeric calls."""

    def __init__(self, a: DeviceOperand, b: DeviceOperand, same: bool, stream=None, chunk_pairs=0,
                 keep_pairs=True, path="model", check=True, algorithm="auto", row_hash=True, values=None):
        cu = require_cuda()
        if path not in PATHS:
            raise ValueError(f"path must be one of {tuple(PATHS)}, got {path!r}")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {tuple(ALGORITHMS)}, got {algorithm!r}")
        self.a, self.b, self.same = a, b, same
        self.stream = stream
        self.shape = (a.shape[0], b.shape[1])
        t = time.perf_counter()
        # `values` (a one-shot product): (a_values, b_values, in_dtype, out_dtype) of the first multiply,
        # whose addresses the symbolic phase may already sum (cuda/spgemm.h, a_values); kept alive until then
        self._fused = None
        pa = pb = None
        codes = (0, 0)
        if values is not None:
            av, bv, in_dtype, out_dtype = values
            pa, keep_a = a.values_address(av, in_dtype, stream)
            pb, keep_b = (pa, keep_a) if same else b.values_address(bv, in_dtype, stream)
            self._fused = (av, bv, pa, pb, keep_a, keep_b)
            codes = (_DTYPE_CODE[np.dtype(in_dtype)], _DTYPE_CODE[np.dtype(out_dtype)])
        # `check`: device operands are validated first (a clear ValueError, never a fault) and found
        # canonical or not, in the same synchronisation as the model's samples
        self._cap = cu.spgemm_analyse(a.csr6(), b.csr6(), int(chunk_pairs or 0), bool(keep_pairs), PATHS[path],
                                      bool(same), ALGORITHMS[algorithm], bool(check), not row_hash, pa, pb, *codes,
                                      stream)
        self.seconds = {"symbolic": time.perf_counter() - t}
        self.info = cu.spgemm_info(self._cap)

    def stats(self) -> dict:
        i = dict(self.info)
        i.update(_cuda_info_extra(i))
        return i

    def close(self):
        self._cap = None

    def multiply(self, a_values, b_values, in_dtype, out_dtype, drop_zeros: bool, lib: str, poison=False):
        """C's (indptr, indices, data) in `lib` ("cupy" or "numpy"), from the operands' values
        (arrays aligned with their CSR: CuPy, NumPy or the operands' own).  ``poison`` (tests)
        fills the result arrays with -1 / NaN first, so an entry the kernel misses shows."""
        cu = require_cuda()
        if self._cap is None:
            raise RuntimeError("this SpGEMM plan was closed")
        t0 = time.perf_counter()
        m, n = self.shape
        s = self.stream
        fused, self._fused = self._fused, None
        if fused is not None and a_values is fused[0] and (self.same or b_values is fused[1]):
            pa, pb, keep_a, keep_b = fused[2:]  # the addresses the symbolic phase was given
        else:
            pa, keep_a = self.a.values_address(a_values, in_dtype, s)
            pb, keep_b = (pa, keep_a) if self.same else self.b.values_address(b_values, in_dtype, s)
        nnz = int(self.info["nnz_structural"])
        bits = 32 if nnz <= INT32_MAX and n <= INT32_MAX + 1 else 64
        if lib == "cupy" and bits == 64:
            raise ValueError(f"the product has {nnz} entries: more than a CuPy CSR matrix indexes (2**31 - 1); "
                             "multiply scipy matrices instead (64-bit indices)")
        itype = np.dtype(np.int32 if bits == 32 else np.int64)
        out = _Arrays(lib, self.a.device)
        rp, ci, vv = out.empty(m + 1, itype), out.empty(nnz, itype), out.empty(nnz, out_dtype)
        if poison:
            for arr in (rp, ci, vv):
                out.poison(arr, s)
        zeros = cu.spgemm_numeric(self._cap, pa, pb, _DTYPE_CODE[np.dtype(in_dtype)], out.addr(rp), out.addr(ci),
                                  bits, out.addr(vv), _DTYPE_CODE[np.dtype(out_dtype)], s)
        del keep_a, keep_b
        if drop_zeros and zeros:
            rp2, ci2, vv2 = out.empty(m + 1, itype), out.empty(nnz - zeros, itype), out.empty(nnz - zeros, out_dtype)
            cu.spgemm_compact(m, nnz, out.addr(rp), out.addr(ci), out.addr(vv), bits,
                              _DTYPE_CODE[np.dtype(out_dtype)], out.addr(rp2), out.addr(ci2), out.addr(vv2), s)
            rp, ci, vv = rp2, ci2, vv2
        self.seconds["numeric"] = time.perf_counter() - t0
        self.info = cu.spgemm_info(self._cap)  # the numeric phases' times (ACCSPMM_SPGEMM_PROFILE)
        return out.finish(rp, ci, vv, s)

    def tiles(self) -> dict:
        """C's tiles as host arrays (tests): tile_row_offsets, tile_cols, tile_masks, row_offsets."""
        cu = require_cuda()
        t = cu.spgemm_tiles(self._cap)
        mt = (self.shape[0] + 7) // 8
        nc = t["tiles_c"]
        out = {}
        for name, count, dtype in (("tile_row_offsets", mt + 1, np.int64), ("tile_cols", nc, np.int32),
                                   ("tile_masks", nc, np.uint64), ("row_offsets", self.shape[0] + 1, np.int64)):
            host = np.empty(count, dtype)
            if count:
                cu.memcpy_dtoh(host, t[name], self.stream)
            out[name] = host
        return out


def _cuda_info_extra(i: dict) -> dict:
    """Derived statistics: entries per nonempty tile of A and B (exact for the tile algorithm, the
    model's sample otherwise), surviving fraction of candidate tile pairs."""
    tiles = i["algorithm"] == "tiles"
    return {"nnz_per_tile_a": (i["values_a"] / i["tiles_a"] if i["tiles_a"] else 0.0) if tiles else i["density_a"],
            "nnz_per_tile_b": (i["values_b"] / i["tiles_b"] if i["tiles_b"] else 0.0) if tiles else i["density_b"],
            "pair_survival": i["pairs"] / i["raw_pairs"] if i["raw_pairs"] else 0.0}


def trim_pool():
    """Gives the library's cached device memory (cuda/device.cu's pool: SpGEMM products, plans and
    the GPU format build allocate from it; freed memory is kept up to ACCSPMM_POOL_KEEP_BYTES,
    default 1 GiB) back to the driver."""
    require_cuda().spgemm_trim_pool()


class _Arrays:
    """Result arrays in CuPy (kept on the device) or device arrays copied to NumPy at the end."""

    def __init__(self, lib: str, device: int):
        self.lib, self.device = lib, device
        if lib == "cupy":
            import cupy

            self.cupy = cupy

    def empty(self, count, dtype):
        if self.lib == "cupy":
            with self.cupy.cuda.Device(self.device):
                return self.cupy.empty(int(count), dtype=dtype)
        return DeviceArray((int(count),), dtype, self.device)

    def poison(self, arr, stream):
        """All bytes 0xFF: -1 for indices, NaN for float values."""
        from . import _cuda

        nbytes = arr.nbytes
        if nbytes:
            _cuda.memset(self.addr(arr), 0xFF, nbytes, stream)

    def addr(self, arr) -> int:
        return int(arr.data.ptr) if self.lib == "cupy" else arr.ptr

    def finish(self, rp, ci, vv, stream):
        if self.lib == "cupy":
            return rp, ci, vv
        host = tuple(a.to_host(None, stream) for a in (rp, ci, vv))
        for a in (rp, ci, vv):
            a.free()
        return host
