#!/usr/bin/env bash
# Builds the extensions for another Python (default: the GPU machine's 3.12) on this machine and packs
# them into .prebuilt/ext.tar.xz, which `PREBUILT=1 bash benchmarks/gpu_run.sh` unpacks instead of
# compiling there.  Needs that Python with numpy and setuptools, and nvcc.
#   PYTHON=/path/to/python3.12 bash benchmarks/prebuild.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.12}
tag=$($PY -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
ACCSPMM_CUDA=1 ACCSPMM_CUDA_ARCHS=${ACCSPMM_CUDA_ARCHS:-90} $PY setup.py -q build_ext --inplace
mkdir -p .prebuilt
tmp=$(mktemp -d)
cp "accspmm/_core$tag" "accspmm/_cuda$tag" "$tmp/"
strip --strip-unneeded "$tmp/_core$tag" "$tmp/_cuda$tag"  # host symbols only: the device code stays
XZ_OPT=-9e tar -cJf .prebuilt/ext.tar.xz -C "$tmp" "_core$tag" "_cuda$tag"  # the device call carries 64 MiB
rm -rf "$tmp"
ls -la .prebuilt/ext.tar.xz
