"""TF32 Tensor-Core SpMM on BitTCF (GPU): upload and launch. Kernel: cuda/tf32_spmm.cu."""
