"""PyTorch integration: the ``torch.ops.accspmm.spmm`` operator, its autograd and fake kernels,
and the torch side of ``Plan.__call__``.

Loaded only when torch is already imported (``import accspmm`` never imports it): by a plan
created while torch is loaded, or by the first call with a tensor.

``torch.ops.accspmm.spmm(B, plan, transpose=False)`` returns ``A @ B`` (``A.T @ B`` with
``transpose``) for the plan of handle ``plan`` (``Plan.handle``):

- CPU tensors run on the plan's host path (NumPy views of the tensors, no copy when contiguous),
  CUDA tensors on the GPU (the same C call as ``Plan.__call__``);
- autograd for B: dL/dB = A^T @ dL/dC through the plan's transposed plan, built once, lazily, at
  the first backward, with the same device, precision and dtype.  A's values are constants (no
  gradient for A).  The backward of the transposed op is the op again, so higher derivatives work;
- a fake kernel gives the output's shape and dtype, so ``torch.compile(fullgraph=True)`` traces
  through a plan call, and ``torch.library.opcheck`` passes;
- half-precision plans (``precision="fp16"``/``"bf16"``) too: the kernel is the plan's call, C has
  B's half dtype (float32 for a float32 B, which the call rounds), and the gradient is the
  transposed half plan's product.

Registered with ``torch.library.Library.define``/``impl`` (not the ``custom_op`` decorator, whose
Python wrapper costs more per call).  Eager calls skip the dispatcher entirely: ``Plan.__call__``
launches from C, and where B requires grad it goes through ``_EagerSpMM`` (a plain
``torch.autograd.Function`` with the same formula); ``torch.compile`` traces the operator.
"""

from __future__ import annotations

import numpy as np
import torch

from . import _half, _plan
from ._device import register_interop, torch_dtype_maps
from ._validate import HALF_MESSAGE, plain_real

_TORCH_TO_NUMPY, _TORCH_OF = torch_dtype_maps()
_NUMPY_OF = {t: d for t, d in _TORCH_TO_NUMPY.items() if plain_real(d)}  # the dtypes B may have on a plan

_lib = torch.library.Library("accspmm", "DEF")
_lib.define("spmm(Tensor B, int plan, bool transpose=False) -> Tensor")


def numpy_dtype(B: torch.Tensor) -> np.dtype:
    """B's dtype as NumPy's; TypeError for half precisions (named in the message) and the rest."""
    if B.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(HALF_MESSAGE.format(str(B.dtype).replace("torch.", "")))
    if B.dtype not in _NUMPY_OF:
        raise TypeError(f"B must hold real numbers, got dtype {B.dtype}")
    return _NUMPY_OF[B.dtype]


def _operand(plan, transpose: bool):
    p = _plan.lookup(plan)
    return p.transposed() if transpose else p


def _half_plan(p) -> bool:
    return p.precision in _half.PRECISIONS


def _spmm_kernel(B, plan, transpose=False):
    p = _operand(plan, transpose)
    if _half_plan(p):  # below autograd: the plan's product of B's values (no autograd of its own)
        with torch.no_grad():
            return p(B.detach())
    return run(p, B, None, None, False, raw=True)


_lib.impl("spmm", _spmm_kernel, "CPU")
_lib.impl("spmm", _spmm_kernel, "CUDA")


@torch.library.register_fake("accspmm::spmm")
def _spmm_fake(B, plan, transpose=False):
    p = _plan.lookup(int(plan))
    m, k = p.shape
    rows, inner = (k, m) if transpose else (m, k)
    torch._check(B.dim() in (1, 2), lambda: f"B must be 1- or 2-dimensional, got {B.dim()} dimensions")
    torch._check(B.shape[0] == inner, lambda: f"dimension mismatch: the operator has {inner} columns, B {B.shape[0]} rows")
    if _half_plan(p):  # C in B's half format, or float32 for a B that the call rounds (accspmm._half)
        kind = _half._b_kind(str(B.dtype).replace("torch.", ""), p.precision)
        dtype = B.dtype if kind == "half" else torch.float32
    else:
        dtype = _TORCH_OF[p.dtype]
    return B.new_empty((rows,) if B.dim() == 1 else (rows, B.shape[1]), dtype=dtype)


def _setup_context(ctx, inputs, output):
    _, plan, transpose = inputs
    ctx.plan, ctx.transpose = plan, transpose
    ctx.keep = _plan.lookup(plan)  # the graph holds the plan until its backward has run


def _backward(ctx, grad):
    return torch.ops.accspmm.spmm(grad, ctx.plan, not ctx.transpose), None, None


torch.library.register_autograd("accspmm::spmm", _backward, setup_context=_setup_context)


class _EagerSpMM(torch.autograd.Function):
    """Eager autograd of ``Plan.__call__``: the same product and gradient as the operator, without
    the dispatcher round trip of a Python-kernel operator (H100 host cost per forward call: about
    70 µs through the operator's autograd, ~30 µs through the dispatcher alone, against 7 µs for
    the C call; benchmarks/bench_python.py).  The backward applies it again with the transposed
    plan, so it is differentiable too."""

    @staticmethod
    def forward(ctx, B, plan):
        ctx.plan = plan
        return run(plan, B, None, None, False, raw=True)

    @staticmethod
    def backward(ctx, grad):
        return _EagerSpMM.apply(grad, ctx.plan.transposed()), None


def call(plan, B: torch.Tensor, out, stream, check_finite):
    """``Plan.__call__`` for a tensor the C fast path did not take (``run`` checks B's dtype)."""
    if torch.is_grad_enabled() and B.requires_grad:
        if out is not None:
            raise RuntimeError("accspmm: out= does not support automatic differentiation (B requires grad); "
                               "call without out=, or under torch.no_grad()")
        if stream is not None:
            raise ValueError("accspmm: stream= is not supported with autograd; use `with torch.cuda.stream(s):`")
        plan._check_finite(B.detach(), check_finite)
        return _EagerSpMM.apply(B, plan)
    return run(plan, B, out, stream, check_finite, raw=False)


def traced_call(plan, B, out):
    """``Plan.__call__`` under torch.compile: the operator, which dynamo records in the graph."""
    C = torch.ops.accspmm.spmm(B, plan.handle, False)
    if out is None:
        return C
    out.copy_(C)
    return out


def run(plan, B: torch.Tensor, out, stream, check_finite, raw: bool):
    """``A @ B`` for a tensor B, no autograd (``raw``: B may require grad, the op's kernel)."""
    numpy_dtype(B)
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor when B is one, got {type(out).__name__}")
        if out.requires_grad:
            raise RuntimeError("accspmm: out= must not require grad")
        if out.device != B.device:
            raise ValueError(f"out is on {out.device} but B is on {B.device}")
    if B.is_cuda:
        register_interop("torch")
        if raw and plan._fast is not None and stream is None and not check_finite:
            C = plan._fast(B, out, True)
            if C is not None:
                return C
        C = plan._call_gpu_array(B.detach().resolve_neg(), None if out is None else out.detach(), stream,
                                 check_finite)
        return out if out is not None else C
    if out is not None and not out.is_contiguous():
        raise ValueError("out must be C-contiguous")
    Bn = B.detach().resolve_neg().numpy()
    C = plan._call_host(Bn, None if out is None else out.detach().numpy(), stream, check_finite)
    return out if out is not None else torch.from_numpy(C)


_plan._compiling = torch.compiler.is_compiling
_plan._traced_call = traced_call
