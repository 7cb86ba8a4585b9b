"""accspmm: sparse x dense matrix multiplication on NVIDIA Tensor Cores, with an exact CPU path.

>>> import accspmm, numpy as np
>>> A = accspmm.datasets.load_bundled(np.float32)
>>> C = accspmm.spmm(A, np.ones((A.shape[1], 16), np.float32))        # A @ B
>>> p = accspmm.plan(A, device="cpu"); C = p(np.ones((A.shape[1], 16), np.float32))

Precision: GPU default "tf32" for float32 data (Tensor Cores, inputs rounded to TF32, FP32
accumulate); "fp32"/"fp64" are exact.  CPU computes in the data's width.  See ``Plan``.
"""

from . import datasets
from ._device import cuda_available, cuda_status, device_info
from ._format import PAD_COL, BitTCF
from ._plan import Plan, plan, spmm
from ._reorder import reorder, reordering_report
from ._spgemm import SpGEMMPlan, spgemm, spgemm_plan

__version__ = "0.1.0"

__all__ = ["BitTCF", "PAD_COL", "Plan", "SpGEMMPlan", "cuda_available", "cuda_status", "datasets", "device_info",
           "plan", "reorder", "reordering_report", "spgemm", "spgemm_plan", "spmm", "__version__"]
