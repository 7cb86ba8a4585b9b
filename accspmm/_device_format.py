"""BitTCF built on the GPU (cuda/bittcf_build.cu) for GPU TF32 plans.

The canonical CSR (and the permutation, unless it is the identity) goes up once; the device sorts
each window's entries by column and writes the format, the TF32 kernel's packed block metadata and
the TF32-rounded values.  Only the window offsets (ceil(m / 8) + 1 integers, which the schedule and
the statistics need) come back to the host.  Bit-identical to the C builder
(:meth:`accspmm.BitTCF.from_csr`), which stays the reference and serves CPU plans.
"""

from __future__ import annotations

import numpy as np

from . import _core
from ._device import DeviceArray, _cuda_for_arrays


class DeviceBitTCF:
    """A BitTCF whose arrays live on the GPU, in the plan's dict ``dev``: ``perm``,
    ``window_offsets``, ``block_meta`` and ``values`` (TF32-rounded), the TF32 kernel's inputs.
    Host attributes: ``shape``, ``nnz``, ``num_blocks``, ``num_windows``, ``window_offsets``
    (int64 NumPy), ``perm`` (None for the identity), ``stats`` (as :attr:`BitTCF.stats`)."""

    #: ``method`` of the build (cuda/bittcf_build.cu): the sort of every entry, or the ranks of the
    #: small matrices' path (no sort; two cooperative launches).  Both give the same arrays.
    METHODS = {"auto": 0, "sort": 1, "ranks": 2}

    def __init__(self, csr, perm, dev: dict, device: int, stream=None, keep_blocks=False, defer=False,
                 method="auto", validate=False, keep_csr=False):
        """csr: canonical float32 CSR (accspmm._validate.CSR: C-contiguous arrays of its dtypes, which
        the extension checks); perm: int64 NumPy (new -> old, already checked) or None for the
        identity.  validate: csr has not been checked (``as_csr(A, check=False)``): the device checks
        its offsets and columns first (ValueError if malformed, or if a row holds a column twice)
        and takes its rows in any column order; ``canonical`` then says whether every row's columns
        ascended (always True without validate).  keep_blocks: also keep the BitTCF arrays on the
        device (``block_cols``, ``block_mask``, ``block_value_offsets``, ``raw_values``; see to_host).
        defer: return once the window offsets are on the host, with the build's last steps still
        queued on ``stream``; :meth:`wait` must run before the arrays are used on another stream
        (a plan waits at its first call, after its decision, so the two overlap).
        method: "auto" (the ranks up to 2^20 nonzeros, else the sort), "sort" or "ranks" (tests: a
        CSR whose rows' columns do not ascend goes to the sort either way); ``self.method`` says
        which ran.  keep_csr: the build's upload of the CSR stays on the device as ``csr_block`` (int64
        offsets, int32 columns, float32 values back to back, as given; for the CSR kernels, which
        would otherwise upload it again: accspmm._tf32.TF32Runner._csr_upload)."""
        _cuda = _cuda_for_arrays()  # not ``from . import``: importlib's fromlist handling costs microseconds
        m, k = csr.shape
        if csr.dtype != np.float32:
            raise TypeError("the GPU BitTCF build takes float32 values (TF32 plans)")
        self.shape = (m, k)
        self.nnz = int(csr.nnz)
        self._perm = perm
        W = -(-m // 8)
        self.num_windows = W
        # in the build's stream order (no wait): the build writes them, and every user waits for it
        dev["perm"] = DeviceArray.ordered((m,), np.int64, device, stream)
        if perm is not None:  # the identity is written by the build (its first kernel, no launch of its own)
            _cuda.memcpy_htod(dev["perm"].ptr, np.ascontiguousarray(perm, np.int64), stream)
        dev["window_offsets"] = DeviceArray.ordered((W + 1,), np.int64, device, stream)
        self.window_offsets = np.empty(W + 1, np.int64)
        # the build uploads the host CSR itself, into temporaries of the pool (one pass, no host sync);
        # it reads the first nnz entries of the arrays as they are (no ascontiguousarray: ~3 us each)
        out = _cuda.bittcf_gpu_build(m, k, self.nnz, csr.indptr, csr.indices, csr.data,
                                     None if perm is None else dev["perm"].ptr, dev["window_offsets"].ptr,
                                     self.window_offsets, keep_blocks, stream, defer, self.METHODS[method],
                                     dev["perm"].ptr if perm is None else None, validate, keep_csr)
        self._ready = int(out["ready"])  # an event handle, 0 when the build synchronised
        self.method = {0: "none", 1: "sort", 2: "ranks"}[out["method"]]
        self.canonical = bool(out["canonical"])
        self._failed = None
        nb = self.num_blocks = int(out["num_blocks"])
        dev["block_meta"] = DeviceArray((max(nb, 1) * 12,), np.int32, device, adopt=out["block_meta"])
        dev["values"] = DeviceArray((max(self.nnz, 1),), np.float32, device, adopt=out["values_tf32"])
        if keep_blocks:
            dev["block_cols"] = DeviceArray((max(nb, 1) * 8,), np.int32, device, adopt=out["block_cols"])
            dev["block_mask"] = DeviceArray((max(nb, 1),), np.uint64, device, adopt=out["block_mask"])
            dev["block_value_offsets"] = DeviceArray((nb + 1,), np.int64, device, adopt=out["block_value_offsets"])
            dev["raw_values"] = DeviceArray((max(self.nnz, 1),), np.float32, device, adopt=out["values"])
        if out["csr"]:
            dev["csr_block"] = DeviceArray((8 * (m + 1) + 8 * self.nnz,), np.uint8, device, adopt=out["csr"])
        self.window_offsets.flags.writeable = False
        self._dev = dev
        self._names = ("perm", "window_offsets", "block_meta", "values") + (
            ("block_cols", "block_mask", "block_value_offsets", "raw_values") if keep_blocks else ()) + (
            ("csr_block",) if out["csr"] else ())
        self._stats = None

    def wait(self):
        """Waits for a deferred build; raises its CUDA error, if any, then and at every later wait
        (the arrays are not usable); a no-op after a build that succeeded."""
        if self._failed is not None:
            raise RuntimeError(f"the GPU build of this format failed: {self._failed}")
        if self._ready:
            from . import _cuda

            ready, self._ready = self._ready, 0
            try:
                _cuda.event_wait(ready)
            except Exception as exc:
                self._failed = exc
                raise

    def free(self):
        """Frees this format's device arrays now and takes them out of the plan's dict (after a deferred
        build has finished): a plan that builds another format instead."""
        try:
            self.wait()
        finally:
            for name in self._names:
                arr = self._dev.pop(name, None)  # the CSR kernels may have taken csr_block
                if arr is not None:
                    arr.free()
            self._names = ()

    def __del__(self):
        if getattr(self, "_ready", 0):
            try:
                from . import _cuda

                _cuda.event_destroy(self._ready)
            except Exception:  # interpreter shutdown
                pass
            self._ready = 0

    @property
    def perm(self) -> np.ndarray:
        """The row permutation (new -> old), int64."""
        if self._perm is None:
            return np.arange(self.shape[0], dtype=np.int64)
        return self._perm

    @property
    def stats(self) -> dict:
        if self._stats is None:
            m, k = self.shape
            s = _core.bittcf_window_stats(m, k, self.nnz, self.window_offsets, False)
            s["nnz"] = self.nnz
            s["bytes_ratio_vs_csr"] = s["bytes"] / s["csr_bytes"] if s["csr_bytes"] else float("nan")
            self._stats = s
        return dict(self._stats)

    @property
    def nbytes(self) -> int:
        """Bytes of the BitTCF arrays (as :attr:`BitTCF.nbytes`; the device holds the packed form)."""
        return int(self.stats["bytes"])

    def to_host(self):
        """(window_offsets, block_cols, block_mask, block_value_offsets, values, block_meta,
        values_tf32) as NumPy arrays (tests: built with keep_blocks=True)."""
        self.wait()
        d = self._dev
        if "block_cols" not in d:
            raise RuntimeError("built without keep_blocks: the BitTCF arrays were not kept")
        nb, nnz = self.num_blocks, self.nnz

        def get(name, count):
            return d[name].to_host()[:count]

        return (d["window_offsets"].to_host(), get("block_cols", 8 * nb), get("block_mask", nb),
                get("block_value_offsets", nb + 1), get("raw_values", nnz), get("block_meta", 12 * nb),
                get("values", nnz))
