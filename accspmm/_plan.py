"""Plans: preprocess a sparse matrix once, multiply it by many dense matrices.

Precision semantics (also in the README and each plan's repr):

- ``"fp32"`` / ``"fp64"``: exact IEEE arithmetic of that width (CPU: C core; GPU: cuSPARSE).
- ``"tf32"``: GPU Tensor Cores; float32 in and out, A and B rounded to TF32 (10-bit mantissa,
  round to nearest), products accumulated in float32.  GPU default for float32 data.
- The CPU computes in the data's own width: float32 data -> "fp32", float64 -> "fp64".

Nothing changes precision silently: ``precision=None`` picks the default above for the chosen
device, and an explicit precision that does not fit the dtype raises ValueError.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
import weakref

import numpy as np
import scipy.sparse as sp

from . import _core, _half, _payback, _reorder
from ._device import (DeviceArray, ForeignArray, array_library, cuda_available, cuda_status, load_cusparse,
                      register_interop, require_cuda, stream_handle)
from ._format import BitTCF, check_perm
from ._tf32 import AUTOTUNE_MIN_CALLS
from ._validate import INT32_MAX, CSR, as_csr, as_host_b, check_b_dtype, check_out, compute_dtype, is_gpu_array

DEVICES = ("auto", "cpu", "gpu")
PRECISIONS = ("tf32", "fp32", "fp64", "fp16", "bf16")
FORMATS = ("auto", "csr", "bittcf")
_SPMM_CSR_ALGS = {"default": 0, "alg1": 4, "alg2": 6, "alg3": 12}
#: the largest schedule cap that tuning["cap"] may force (csrc/acc_schedule_cost.c's limit)
MAX_CAP = 1 << 20


# The PyTorch op (accspmm._torch) names a plan by an integer handle: torch.library ops take
# tensors and plain scalars.  Plans are held weakly: a handle dies with its plan.
_PLANS = weakref.WeakValueDictionary()
_HANDLES = itertools.count(1)


def register_torch_op() -> None:
    """Registers ``torch.ops.accspmm.spmm`` when torch is loaded, so that a plan made now is traced
    by torch.compile as the op (a PyTorch without torch.library's API: a call with a tensor imports
    accspmm._torch again and reports why)."""
    if "torch" in sys.modules:
        try:
            from . import _torch  # noqa: F401
        except (ImportError, AttributeError):
            pass


def _never() -> bool:
    return False


# Set by accspmm._torch when it loads: torch.compiler.is_compiling, and the traced form of a call.
_compiling = _never
_traced_call = None


def lookup(handle: int) -> "Plan":
    """The live plan of a handle (``Plan.handle``); the torch op's argument."""
    p = _PLANS.get(int(handle))
    if p is None or p._closed:
        raise RuntimeError(f"accspmm plan {handle} was closed or garbage-collected")
    return p


def _resolve_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "auto":
        return "gpu" if cuda_available() else "cpu"
    if device == "gpu":
        require_cuda()
    return device


def _resolve_precision(precision, dtype: np.dtype, device: str) -> str:
    if precision is None:
        if dtype == np.float64:
            return "fp64"
        return "tf32" if device == "gpu" else "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS} or None, got {precision!r}")
    if precision == "fp64" and dtype != np.float64:
        raise ValueError("precision='fp64' needs float64 data; convert A (and B) with .astype(numpy.float64)")
    if precision in ("fp32", "tf32") and dtype != np.float32:
        raise ValueError(f"precision={precision!r} needs float32 data; got {dtype} "
                         f"(convert with .astype(numpy.float32), or use precision='fp64')")
    if precision == "tf32" and device != "gpu":
        raise ValueError("precision='tf32' runs on Tensor Cores: it needs device='gpu' "
                         f"(CPU computes exactly in fp32/fp64). CUDA: {cuda_status() or 'available'}")
    return precision


def _resolve_format(fmt: str, device: str, precision: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    natural = "bittcf" if precision == "tf32" else "csr"
    if fmt == "auto":
        return natural
    if device == "gpu" and fmt != natural:
        raise ValueError(f"on the GPU precision={precision!r} uses format={natural!r}, not {fmt!r}")
    return fmt


class Plan:
    """``C = A @ B`` for a fixed sparse ``A``: validation, format build and upload happen once.

    Parameters
    ----------
    A : scipy.sparse matrix or array (CSR used as is; other formats converted with ``tocsr()``),
        float32 or float64 values, int32 or int64 indices.  Duplicates are summed.
    device : "auto" (GPU when available), "cpu" or "gpu".
    precision : None (default: "tf32" on GPU for float32, "fp32" on CPU, "fp64" for float64), or
        "tf32", "fp32", "fp64" (see module docstring).
    format : "auto", "csr" or "bittcf" ("bittcf" on the CPU runs the format's reference kernel).
    reorder : row reordering for BitTCF plans (see :func:`accspmm.reorder`): "none", "rcm", "degree",
        "jaccard", "affinity" or "auto" (fewest TC blocks among ``accspmm._reorder.AUTO_CANDIDATES``).
        Default None: no reordering (the plan stays cheap: on the GPU the format is built on the
        device in milliseconds), unless ``calls`` is given and a prediction says that "auto" pays
        back its cost within that many calls (``accspmm._reorder.choose``: "auto" run on a sample
        of row runs predicts the TC blocks it saves; ``PAYBACK`` holds the cost model).  The method,
        its time, the prediction and why it was chosen are in ``plan.stats["reorder"]``.
        Reordering never changes the result: row i of the reordered product goes to ``C[perm[i]]``,
        and a plan's format never changes after it is built.
    calls : the number of products you expect to make with this plan (a hint; default None:
        unknown).  It decides whether reordering (above), the first call's variant timing
        (``tuning["autotune"]``, on from ``AUTOTUNE_MIN_CALLS`` calls) and, for products of at most 4
        columns, the upload of A's CSR for the CUDA-core CSR kernel (``accspmm._tf32.narrow_csr``)
        are worth their cost.
    reorder_params : dict of the method's parameters (``accspmm._reorder.DEFAULT_PARAMS``), and ``seed``.
    perm : a row permutation (new -> old) of your own for BitTCF, instead of ``reorder``.
    dtype : compute dtype (default: A's); float64 data can be planned in float32 and vice versa.
    balance : TF32 kernel's load balancing (see accspmm._tf32): "auto" (the cost model picks how
        many TC blocks a warp packs and which long windows are split across a thread block), True
        (a balanced schedule always), False (one window per warp, nothing split).  Every schedule
        gives a deterministic result; it is in ``plan.stats["schedule_by_n"]``.
    tuning : advanced, for experiments: ``{"build": "cpu"}`` builds the format with the C builder and
        uploads it (default "gpu": built on the device, bit-identical); ``{"schedule": "host"}``
        prices the caps and builds the task rows with the C schedule and uploads them (default
        "device": cuda/tf32_schedule.cu, the same rows); ``{"check": "host"}`` checks A's offsets
        and columns on the host (default "device": a plan with no reordering and no ``perm`` leaves
        that O(m + nnz) pass to the GPU build, which raises the same errors, and sends A back to
        the host only when a row holds a column twice, to sum the duplicates; ``plan.stats
        ["csr_checked_on"]`` says where it ran); ``{"cap": int}`` forces the
        schedule's cap and the keys of ``accspmm._tf32.VARIANT_KEYS`` force a kernel variant or the
        task launch order (neither ever changes a result bit).  ``{"autotune": bool}`` turns the
        variant timing of the first call for each width n on or off (default: on when
        ``calls >= AUTOTUNE_MIN_CALLS`` and no variant field is forced): a few candidate variants of
        the same schedule are timed on the caller's B, C and stream, synchronously, and the fastest
        is kept for later calls; the result bits are the same whichever wins; the times are in
        ``plan.stats["schedule_by_n"][n]["tuned_ms"]``.  ``{"narrow": "auto" | "csr" | "bittcf",
        "csr_lanes": 1 .. 32}`` picks the CUDA-core kernel of products of at most 4 columns (default "auto":
        the time models of ``accspmm._tf32.narrow_csr``; "csr" at the model's lanes or ``csr_lanes``).
        ``{"wide": "auto" | "csr" | "bittcf"}`` picks the kernel of wider products (default "auto": the CUDA-core
        CSR kernel at n = 5-32 where ``accspmm._tf32.wide_csr`` predicts it at least 10% faster, and at n = 33-256
        (multiples of 4) where A's rows fit one wave of the GPU and BitTCF's blocks are sparse, else the Tensor
        Cores; "csr" at every n > 4; the bits may differ between the two, never between calls);
        ``{"csr_part": int}`` cuts that kernel's long rows in parts of at most so many entries (default:
        ``accspmm._tf32.csr_wide_part``, 32 or 64; the bits of a row in several parts depend on it);
        ``{"csr_lane_cols": 4 | 8}`` gives that kernel's lanes 4 or 8 columns each (default:
        ``accspmm._tf32.csr_wide_lane_cols``, 8 for half operands on long rows; the same bits either way).
        FP16/BF16 plans take only ``{"autotune": bool}``, the narrow keys, ``"wide"``, ``"csr_part"``,
        ``"csr_lane_cols"`` (BitTCF: the same rules and timing) and ``{"kernel": "rows" | "pairs" | "quads" |
        "auto"}`` (BSR16: a warp per block row, or per pair of block rows (accspmm._half.PAIR_MIN_N,
        PAIR_SHARE_MAX), or a warpgroup per quad).
    cusparse_alg : cuSPARSE CSR algorithm for "fp32"/"fp64" on the GPU: "default", "alg1", "alg2", "alg3".

    Statistics: ``plan.stats`` holds the format's metrics, ``seconds`` (every preprocessing step;
    ``build_gpu_wait``, after the first GPU call: how long it waited for the end of the GPU build),
    ``build_gpu_method`` (GPU TF32 plans: "ranks" up to 2^20 nonzeros, else "sort"; the same format),
    ``reorder`` (method, prediction, why), ``schedule_by_n`` (the kernel's decision per width, with
    ``first_call_seconds``: the host time of that width's first call, decision, schedule and launch, and
    ``schedule_on``: "device" where the schedule was priced and built on the GPU, "host" where on the host,
    "none" for a width on the wide CSR kernel, which reads no schedule) and,
    for GPU TF32 plans, ``vs_cusparse``: the predicted break-even against cuSPARSE at n = 128 in
    calls, both setups included (a cost model: accspmm._payback); :meth:`compare_cusparse` measures it.

    Call the plan with ``B`` (array-like, k x n or length-k vector; a CuPy array; a PyTorch tensor,
    CPU or CUDA, with or without ``requires_grad``) to get ``A @ B`` in the original row order, of
    the same kind as ``B``.  A PyTorch ``B`` that requires grad is differentiated (dL/dB =
    A^T @ dL/dC by a transposed plan built at the first backward; A's values are constants):
    eagerly through a ``torch.autograd.Function``, under ``torch.compile`` through the operator
    ``torch.ops.accspmm.spmm`` with the same formula.

    The call is lean: after the first call for a width n on a stream (which decides and times the
    kernel, synchronously), a call with a CuPy or PyTorch CUDA ``B`` is one C function that
    launches on the library's current stream and returns: no host synchronisation and no device
    allocation beyond the result (through the library's allocator).  Warm up each width once
    before a CUDA-graph capture; captured calls replay with new values in ``B``.
    """

    def __new__(cls, A=None, *args, **kwargs):
        if kwargs.get("precision") in _half.PRECISIONS:  # FP16/BF16: accspmm._half's plan
            return _half.HalfPlan(A, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, A, *, device="auto", precision=None, format="auto", reorder=None, reorder_params=None,
                 perm=None, dtype=None, balance="auto", cusparse_alg="default", tuning=None, calls=None):
        t0 = time.perf_counter()
        csr = A if isinstance(A, CSR) else as_csr(A, check=False)  # checked below, or by the GPU build
        dtype = np.dtype(dtype) if dtype is not None else csr.dtype
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        self.shape = csr.shape
        self.dtype = dtype
        self.device = _resolve_device(device)
        self.precision = _resolve_precision(precision, dtype, self.device)
        self.format = _resolve_format(format, self.device, self.precision)
        if cusparse_alg not in _SPMM_CSR_ALGS:
            raise ValueError(f"cusparse_alg must be one of {tuple(_SPMM_CSR_ALGS)}, got {cusparse_alg!r}")
        self.cusparse_alg = cusparse_alg
        if balance not in ("auto", True, False):
            raise ValueError(f"balance must be 'auto', True or False, got {balance!r}")
        self.balance = balance
        if tuning is not None and "cap" in tuning:
            cap = tuning["cap"]
            if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or not 0 <= cap <= MAX_CAP:
                raise ValueError(f"tuning['cap'] must be an int in [0, {MAX_CAP}] (blocks per warp; 0: one window "
                                 f"per warp), got {cap!r}")
        if tuning is not None and not (self.device == "gpu" and self.precision == "tf32"):
            raise ValueError("tuning applies to the GPU TF32 kernel only (device='gpu', precision='tf32')")
        if calls is not None and (isinstance(calls, bool) or not isinstance(calls, (int, np.integer)) or calls < 0):
            raise ValueError(f"calls must be a non-negative int (the number of products you expect), got {calls!r}")
        self.calls = calls
        if self.device == "gpu" and self.precision == "tf32" and "autotune" not in (tuning or {}):
            # timing the variants costs ~50 launches: worth it only when many calls follow
            tuning = dict(tuning or {}, autotune=calls is not None and calls >= AUTOTUNE_MIN_CALLS)
        if tuning is not None and tuning.get("build", "gpu") not in ("gpu", "cpu"):
            raise ValueError(f"tuning['build'] must be 'gpu' or 'cpu', got {tuning['build']!r}")
        self._tuning = tuning
        # a default GPU BitTCF plan (no reordering, no permutation) leaves the O(m + nnz) check of A's
        # offsets and columns to the GPU build, which reads them anyway (cuda/bittcf_build.cu: the same
        # errors); every other plan checks A here
        if tuning is not None and tuning.get("check", "device") not in ("device", "host"):
            raise ValueError(f"tuning['check'] must be 'device' or 'host', got {tuning['check']!r}")
        device_check = (self.format == "bittcf" and self.device == "gpu" and perm is None and reorder is None
                        and calls is None and (tuning or {}).get("build", "gpu") == "gpu"
                        and (tuning or {}).get("check", "device") == "device")
        if not device_check:
            csr = csr.checked()
        self._closed = False
        self._fast = None  # the C steady-state call (TF32 on the GPU)
        self._T = None  # the plan of A^T (autograd's backward), built at first use
        self.handle = next(_HANDLES)
        _PLANS[self.handle] = self
        self._device_id = None
        self._dev = {}  # name -> DeviceArray
        self._cusparse = {}  # n -> capsule
        self.stats = {"nnz": csr.nnz, "shape": csr.shape, "device": self.device,
                      "precision": self.precision, "format": self.format,
                      "csr_checked_on": "host" if csr.canonical is not None else "device"}
        csr = csr.astype(dtype)
        self._source = csr  # kept for the transposed plan
        self._csr = None
        self._bittcf = None
        if perm is not None and reorder not in (None, "none"):
            raise ValueError("pass either perm or reorder, not both")
        steps = self.stats["seconds"] = {"validate": time.perf_counter() - t0}
        self._pending = None  # (CSR, canonical or unchecked; perm or None) of a format the GPU builds at upload
        if self.format == "bittcf":
            t = time.perf_counter()
            if csr.canonical is not None:  # else the GPU build checks it, and takes any column order
                csr = csr.canonicalized()
            steps["canonicalize"] = time.perf_counter() - t
            t = time.perf_counter()
            if perm is None:
                params = dict(reorder_params or {})
                perm, info = _reorder.choose(csr, reorder, params, calls, params.pop("seed", 0))
                self.stats["reorder"] = info
            else:
                self.stats["reorder"] = {"method": "perm", "chosen": "perm (given)", "seconds": 0.0}
            steps["reorder"] = time.perf_counter() - t
            t = time.perf_counter()
            if self.device == "gpu" and (tuning or {}).get("build", "gpu") == "gpu":
                identity = self.stats["reorder"]["chosen"] == "none"
                self._pending = (csr, None if identity else check_perm(perm, csr.shape[0]))
            else:
                self._bittcf = BitTCF.from_csr(csr, perm)
                self.stats.update(self._bittcf.stats)
                steps["build"] = time.perf_counter() - t
        else:
            if perm is not None:
                check_perm(perm, csr.shape[0])  # validated even though CSR does not use it
            if reorder not in (None, "none"):
                raise ValueError(f"reorder={reorder!r} needs a BitTCF plan; CSR kernels do not depend on "
                                 "row order (plan with format='bittcf' or precision='tf32')")
            if self.device == "gpu":
                # cuSPARSE assumes sorted rows without duplicates, and cusparseCreateCsr refuses more
                # entries than m * k (duplicates can make that); the C CPU kernel takes any CSR
                t = time.perf_counter()
                csr = csr.canonicalized()
                steps["canonicalize"] = time.perf_counter() - t
                self.stats["nnz"] = csr.nnz  # what cuSPARSE gets (duplicates summed)
            self._csr = csr
        self.stats["build_seconds"] = time.perf_counter() - t0
        if self.device == "gpu":
            t1 = time.perf_counter()
            self._upload()
            self.stats["upload_seconds"] = time.perf_counter() - t1
        steps["total"] = time.perf_counter() - t0
        if self.device == "gpu" and self.format == "bittcf":
            self.stats["vs_cusparse"] = _payback.predict(self.shape, self.stats["nnz"], self.stats["tc_blocks"],
                                                         steps["total"])
        self._finalizer = weakref.finalize(self, Plan._free_device, self._dev, self._cusparse)
        register_torch_op()

    # ---- lifetime -----------------------------------------------------------------------

    @staticmethod
    def _free_device(dev: dict, cusparse: dict):
        cusparse.clear()  # capsules destroy their cuSPARSE plans
        for arr in dev.values():
            arr.free()
        dev.clear()

    def close(self):
        """Frees the plan's device memory now (also done on garbage collection)."""
        self._closed = True
        self._fast = None
        if self.format == "bittcf" and self.device == "gpu":
            self._tf32.launcher.clear()
        if self._T is not None:
            self._T.close()
        self._finalizer()

    def compare_cusparse(self, n: int = 128, reps: int = 20) -> dict:
        """Measures whether this GPU TF32 plan pays for itself against cuSPARSE at width ``n``: its
        preprocessing and kernel time against a fresh cuSPARSE CSR plan's setup (upload,
        descriptors, buffer, preprocess) and call, both timed on this device (accspmm._payback.measure;
        synchronises, costs one cuSPARSE setup per CSR algorithm).  Each call is timed alone
        (``reps`` launches, each between two events: ``break_even_calls``) and in a loop
        (``max(3, reps // 4)`` runs of ``_payback.CHAIN`` back-to-back launches, per launch:
        ``break_even_calls_loop``), on both sides.  Returns the result and stores it in
        ``stats["vs_cusparse_measured"]`` beside the plan-time prediction ``stats["vs_cusparse"]``."""
        if self._closed:
            raise RuntimeError("this plan was closed")
        if not (self.device == "gpu" and self.format == "bittcf"):
            raise ValueError("compare_cusparse needs a GPU TF32 plan (device='gpu', precision='tf32')")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        self.stats["vs_cusparse_measured"] = _payback.measure(self, int(n), int(reps))
        return self.stats["vs_cusparse_measured"]

    def transposed(self) -> "Plan":
        """The plan of ``A.T`` with this plan's device, precision, dtype, format and balance
        (built at the first call: autograd's backward uses it)."""
        if self._closed:
            raise RuntimeError("this plan was closed")
        if self._T is None:
            src = self._source
            At = sp.csr_matrix((src.data, src.indices, src.indptr), shape=src.shape).T.tocsr()
            self._T = Plan(At, device=self.device, precision=self.precision, format=self.format, dtype=self.dtype,
                           balance=self.balance, cusparse_alg=self.cusparse_alg)
        return self._T

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        m, k = self.shape
        return (f"<accspmm.Plan {m}x{k} nnz={self.stats['nnz']} device={self.device} "
                f"precision={self.precision} format={self.format} dtype={self.dtype}>")

    # ---- GPU upload -----------------------------------------------------------------------

    def _upload(self):
        cu = require_cuda()
        self._device_id = cu.get_device()

        # no reference to the plan (the TF32 runner keeps `put`): a plan must not sit in a reference
        # cycle, or the cyclic garbage collector frees its device memory at an arbitrary moment, e.g.
        # inside a CUDA-graph capture, where cudaFree invalidates the capture
        put = functools.partial(_put, self._dev, self._device_id)

        if self.format == "csr":
            csr = self._csr
            wide = csr.nnz > INT32_MAX
            put("indptr", csr.indptr if wide else csr.indptr.astype(np.int32))
            put("indices", csr.indices.astype(np.int64) if wide else csr.indices)
            put("data", csr.data[: csr.nnz])
            self._index_bits = 64 if wide else 32
            load_cusparse()
        else:
            self._upload_bittcf(put)

    def _upload_bittcf(self, put):
        from ._tf32 import TF32Runner, csr_keep

        if self._pending is not None:  # the format is built on the device from the CSR
            from ._device_format import DeviceBitTCF

            t = time.perf_counter()
            csr, perm = self._pending
            self._pending = None
            # the build's last steps overlap the first call's decision, which waits for them
            built = None
            keep = csr_keep(csr.shape[0], csr.nnz)  # the build's upload of A's CSR, for the CSR kernels
            try:
                built = DeviceBitTCF(csr, perm, self._dev, self._device_id, defer=True, validate=csr.canonical is None,
                                     keep_csr=keep)
            except ValueError:
                if csr.canonical is not None:
                    raise
            if built is None:  # malformed (the host check raises its own error) or duplicates (summed here)
                self._source = csr.checked()
                built = DeviceBitTCF(self._source.canonicalized(), perm, self._dev, self._device_id, defer=True,
                                     keep_csr=keep)
            self._bittcf = built
            src = self._source
            if src.canonical is None:  # checked by the build (dataclasses.replace costs ~10 us)
                self._source = CSR(src.shape, src.indptr, src.indices, src.data, self._bittcf.canonical)
            self.stats.update(self._bittcf.stats)
            self.stats["build_gpu_method"] = self._bittcf.method
            self.stats["seconds"]["build_gpu"] = time.perf_counter() - t
        self._tf32 = TF32Runner(self._bittcf, put, self._dev, self._device_id, self.stats, self.balance,
                                self._tuning, csr=self._source)
        self._tf32.calls = self.calls
        self._fast = self._tf32.launcher.call

    # ---- execution ------------------------------------------------------------------------

    def __call__(self, B, *, out=None, stream=None, check_finite=False):
        """Returns ``A @ B`` (NumPy for host B, same library for CuPy/PyTorch B).

        Non-finite values in B follow scipy under every precision: NaN and inf reach exactly the
        output entries where a stored entry of A meets them (the TF32 kernel finds such tiles on
        the device and recomputes them exactly; no host synchronisation).  ``check_finite=True``
        raises ValueError instead when B holds NaN or inf; it reads B back, so it synchronises.
        ``stream``: a CuPy or PyTorch stream or an int handle (default: the current stream of
        B's library, or the legacy default stream for host arrays)."""
        if _compiling():  # torch.compile traces the torch op instead of the C call
            return _traced_call(self, B, out)
        fast = self._fast
        if fast is not None and stream is None and not check_finite:
            C = fast(B, out, False)
            if C is not None:
                return C
        return self._call(B, out, stream, check_finite)

    def _call(self, B, out, stream, check_finite):
        """Every call the C fast path did not take: first calls, host arrays, other libraries,
        autograd, and every error message."""
        if self._closed:
            raise RuntimeError("this plan was closed")
        lib = array_library(B)
        if lib == "torch":
            from . import _torch

            return _torch.call(self, B, out, stream, check_finite)
        if lib == "cupy":
            register_interop("cupy")
        if is_gpu_array(B):
            return self._call_gpu_array(B, out, stream, check_finite)
        return self._call_host(B, out, stream, check_finite)

    def _call_host(self, B, out, stream, check_finite):
        m, k = self.shape
        Bh, vector = as_host_b(B, k)
        if Bh.dtype.kind == "f" and np.dtype(np.result_type(Bh.dtype, self.dtype)) != self.dtype:
            raise TypeError(f"this plan computes in {self.dtype} but B is {Bh.dtype}; "
                            f"cast B or plan with dtype={Bh.dtype}")
        Bc = np.ascontiguousarray(Bh, dtype=self.dtype)
        n = Bc.shape[1]
        shape = (m,) if vector else (m, n)
        if out is not None:
            check_out(out, shape, self.dtype, Bh)
            C = out.reshape(m, n)
        else:
            C = np.empty((m, n), self.dtype)
        self._check_finite(Bc, check_finite)
        if self.device == "cpu":
            self._run_cpu(Bc, C)
        else:
            self._run_gpu_host(Bc, C, stream)
        return out if out is not None else C.reshape(shape)

    def _run_cpu(self, B: np.ndarray, C: np.ndarray):
        if self.format == "csr":
            csr = self._csr
            _core.csr_spmm(csr.shape[0], csr.shape[1], csr.indptr, csr.indices, csr.data, B, C)
        else:
            _core.bittcf_spmm(self._bittcf, B, C)

    def _check_finite(self, B, check: bool):
        """check_finite=True: ValueError when B holds NaN or inf (reads the answer back: synchronises)."""
        if check:
            finite = bool(B.isfinite().all()) if hasattr(B, "isfinite") else bool(np.isfinite(B).all())
            if not finite:
                raise ValueError("B holds NaN or inf (check_finite=True); by default they propagate as in "
                                 "scipy, to exactly the entries where a stored entry of A meets them")

    def _run_gpu_host(self, B: np.ndarray, C: np.ndarray, stream):
        s = stream_handle(stream)
        m, n = C.shape
        dB = DeviceArray.from_host(B, self._device_id, s)
        dC = DeviceArray((m, n), self.dtype, self._device_id)
        try:
            self._launch(dB.ptr, dC.ptr, n, s)
            dC.to_host(C, s)
        finally:
            dB.free()
            dC.free()

    def _call_gpu_array(self, B, out, stream, check_finite: bool):
        if self.device != "gpu":
            raise ValueError("B is a GPU array but this plan runs on the CPU; plan with device='gpu'")
        fb = ForeignArray(B)
        check_b_dtype(fb.dtype)
        if fb.device != self._device_id:
            raise ValueError(f"B is on GPU {fb.device} but the plan lives on GPU {self._device_id}")
        m, k = self.shape
        if len(fb.shape) not in (1, 2):
            raise ValueError(f"B must be 1- or 2-dimensional, got shape {fb.shape}")
        if fb.shape[0] != k:
            raise ValueError(f"dimension mismatch: A has {k} columns but B has {fb.shape[0]} rows")
        if fb.dtype.kind == "f" and np.dtype(np.result_type(fb.dtype, self.dtype)) != self.dtype:
            raise TypeError(f"this plan computes in {self.dtype} but B is {fb.dtype}")
        vector = len(fb.shape) == 1
        n = 1 if vector else fb.shape[1]
        fb = fb.cast(self.dtype).contiguous()
        self._check_finite(fb.obj, check_finite)
        shape = (m,) if vector else (m, n)
        if out is not None:
            fo = ForeignArray(out) if is_gpu_array(out) else None
            if fo is None:
                raise TypeError("out must be a GPU array when B is one")
            if fo.shape != shape or fo.dtype != self.dtype or not fo.c_contiguous:
                raise ValueError(f"out must be a C-contiguous {self.dtype} GPU array of shape {shape}")
            if fo.device != self._device_id:
                raise ValueError("out is on another GPU than the plan")
            if fo.ptr == fb.ptr and m * n > 0:
                raise ValueError("out must not overlap B")
        else:
            fo = fb.empty_like_kind(shape, self.dtype)
        s = stream_handle(stream) if stream is not None else fb.default_stream()
        self._launch(fb.ptr, fo.ptr, n, s)
        return fo.obj

    def _launch(self, d_B: int, d_C: int, n: int, stream):
        """C = A @ B on device pointers (row-major k x n and m x n of self.dtype), on `stream`."""
        from . import _cuda

        m, k = self.shape
        if m == 0 or n == 0:
            return
        nnz = self._csr.nnz if self.format == "csr" else self.stats["nnz"]  # csr: the uploaded arrays' size
        if nnz == 0 or k == 0:
            _cuda.memset(d_C, 0, m * n * self.dtype.itemsize, stream)
            return
        if self.format == "csr":
            plan = self._cusparse.get(n)
            if plan is None:
                dev = self._dev
                plan = _cuda.cusparse_spmm_create(
                    m, k, nnz, dev["indptr"].ptr, dev["indices"].ptr, dev["data"].ptr,
                    self._index_bits, 1 if self.dtype == np.float64 else 0, n,
                    _SPMM_CSR_ALGS[self.cusparse_alg], d_B, d_C, stream)
                self._cusparse[n] = plan
            _cuda.cusparse_spmm_run(plan, d_B, d_C, stream)
        else:
            self._tf32.run(d_B, d_C, n, stream)


def _put(dev: dict, device: int, name, arr) -> DeviceArray:
    """Uploads ``arr`` into ``dev[name]`` (a plan's dict of device arrays)."""
    dev[name] = DeviceArray.from_host(arr, device)
    return dev[name]


def plan(A, **kwargs) -> Plan:
    """Preprocesses ``A`` once; call the result with ``B`` many times. See :class:`Plan`."""
    return Plan(A, **kwargs)


def spmm(A, B, *, device="auto", precision=None, format="auto", reorder="none", out=None, stream=None,
         check_finite=False):
    """``C = A @ B`` for sparse ``A`` and dense ``B`` (one-shot form of :func:`plan`).

    ``device="auto"`` runs on the GPU when one is usable (precision "tf32" by default for float32
    data, see :class:`Plan`), else on the CPU (exact fp32/fp64).  NumPy (or array-like) ``B`` gives
    a NumPy result; a CuPy or PyTorch CUDA ``B`` gives the same kind on the same device.
    The result dtype is numpy's promotion of A's and B's float dtypes (integer B takes A's).
    ``reorder`` defaults to "none" here: a one-shot product cannot amortise a reordering; use
    :func:`plan` to multiply the same A many times (``calls=`` tells it whether reordering pays).
    """
    csr = as_csr(A)
    if precision in _half.PRECISIONS:
        gpu_b = is_gpu_array(B) or (array_library(B) == "torch" and B.is_cuda)
        if gpu_b and device == "cpu":
            raise ValueError("B is a GPU array; use device='gpu' or 'auto', or pass a host array")
        p = Plan(csr, device="gpu" if gpu_b else device, precision=precision, reorder=reorder)
        if getattr(B, "requires_grad", False):  # the autograd graph holds the plan until its backward
            return p(B, out=out, stream=stream, check_finite=check_finite)
        with p:
            return p(B, out=out, stream=stream, check_finite=check_finite)
    if array_library(B) == "torch":
        from . import _torch

        b_dtype = _torch.numpy_dtype(B)
        if B.is_cuda and device == "cpu":
            raise ValueError("B is a CUDA tensor; use device='gpu' or 'auto', or pass a CPU tensor")
        device = "gpu" if B.is_cuda else device
    elif is_gpu_array(B):
        if device == "cpu":
            raise ValueError("B is a GPU array; use device='gpu' or 'auto', or pass a host array")
        device = "gpu"
        b_dtype = ForeignArray(B).dtype
    else:
        B, vector = as_host_b(B, csr.shape[1])
        b_dtype = B.dtype
        if vector:
            B = B.reshape(-1)
    check_b_dtype(b_dtype)
    dtype = compute_dtype(csr.dtype, b_dtype)
    p = Plan(csr, device=device, precision=precision, format=format, reorder=reorder, dtype=dtype)
    runner = getattr(p, "_tf32", None)
    if runner is not None:  # one product: a narrow one keeps BitTCF unless the CSR kernel pays its upload
        runner.calls = 1
    if getattr(B, "requires_grad", False):  # the autograd graph holds the plan until its backward
        return p(B, out=out, stream=stream, check_finite=check_finite)
    with p:
        return p(B, out=out, stream=stream, check_finite=check_finite)


def spmm_bittcf_cpu(fmt: BitTCF, B) -> np.ndarray:
    """``A @ B`` from a BitTCF on the CPU (reference kernel)."""
    m, k = fmt.shape
    Bh, vector = as_host_b(B, k)
    Bc = np.ascontiguousarray(Bh, dtype=fmt.dtype)
    C = np.empty((m, Bc.shape[1]), fmt.dtype)
    _core.bittcf_spmm(fmt, Bc, C)
    return C.reshape(m) if vector else C
