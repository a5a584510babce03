#!/usr/bin/env bash
# Stages, under .carry/ (ignored by git), the pure-Python packages that two measurements import on
# a device machine that cannot reach the network (it has PyTorch with Triton, nothing else):
#   - mamba_ssm's Triton kernels for Mamba-2's chunked scan, the code Megatron-Core trains Mamba
#     layers with (the `ssd_scan` section of scripts/measure_kernels.py), and einops, which they
#     import. The package's top-level __init__ (which loads the compiled selective-scan
#     extension) is replaced by an empty one: nothing here is compiled.
#   - mamba_ssm's CUDA sources of Mamba-1's selective scan (csrc/selective_scan), which the
#     `selective_scan` section of scripts/measure_kernels.py builds on the device with nvcc.
#   - Megatron-Core (megatron/core), for the host time of its own layers
#     (scripts/measure_megatron_host.py).
#
# Usage: scripts/stage-device-packages.sh MAMBA_GIT EINOPS_GIT MEGATRON_GIT
#            [MAMBA_REF] [EINOPS_REF] [MEGATRON_REF]
#   The git directories are mirrors of state-spaces/mamba, arogozhnikov/einops and
#   NVIDIA/Megatron-LM (the workplace's `fetch` tool returns them). Then run the measurements on
#   the device with `.carry` among the carried paths and PYTHONPATH=.carry.
set -euo pipefail

if [ "$#" -lt 3 ]; then
    echo "usage: $0 MAMBA_GIT EINOPS_GIT MEGATRON_GIT [MAMBA_REF] [EINOPS_REF] [MEGATRON_REF]" >&2
    exit 2
fi
mamba_git=$1
einops_git=$2
megatron_git=$3
mamba_ref=${4:-v2.2.6.post3}
einops_ref=${5:-v0.8.1}
# Megatron-Core 0.18.0 is what NeMo 26.06 ships (presets/stacks/nemo-26.06.toml).
megatron_ref=${6:-core_v0.18.0}

root=$(cd "$(dirname "$0")/.." && pwd)
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT

git -C "$mamba_git" archive "$mamba_ref" mamba_ssm/ops/triton mamba_ssm/utils/torch.py \
    csrc/selective_scan | tar -x -C "$staging"
: > "$staging/mamba_ssm/__init__.py"
: > "$staging/mamba_ssm/ops/__init__.py"
: > "$staging/mamba_ssm/utils/__init__.py"
git -C "$einops_git" archive "$einops_ref" einops | tar -x -C "$staging"
git -C "$megatron_git" archive "$megatron_ref" megatron/core | tar -x -C "$staging"
: > "$staging/megatron/__init__.py"
{
    echo "state-spaces/mamba $mamba_ref $(git -C "$mamba_git" rev-parse "$mamba_ref^{commit}")"
    echo "arogozhnikov/einops $einops_ref $(git -C "$einops_git" rev-parse "$einops_ref^{commit}")"
    echo "NVIDIA/Megatron-LM $megatron_ref $(git -C "$megatron_git" rev-parse "$megatron_ref^{commit}")"
} > "$staging/SOURCES"

rm -rf "$root/.carry"
mv "$staging" "$root/.carry"
trap - EXIT
echo "staged under $root/.carry ($(du -sh "$root/.carry" | cut -f1)):"
cat "$root/.carry/SOURCES"
