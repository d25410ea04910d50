#!/usr/bin/env bash
# One paper run on one 8-GPU node:  recipes/train.sh TASK ALGO VARIANT [extra Hydra overrides]
#   TASK     pe-g-s2 | pe-g-s3 | pe-f-d6 | pe-f-d8
#   ALGO     ppo | grpo | gspo
#   VARIANT  vanilla | as_only | as_bt
# Environment: AREW_MODEL_PATH (default Qwen/Qwen2.5-7B-Instruct), AREW_DATA_DIR (default ./data).
# The task's data is prepared on first use.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,7p' "$0"; exit 2
fi
task=$1 algo=$2 variant=$3; shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
data_dir=${AREW_DATA_DIR:-data}
if [ ! -f "$data_dir/$task/train.parquet" ]; then
  arew prepare "$task" --out "$data_dir/$task"
fi
exec python -m verl.trainer.main_ppo --config-path "$root/configs" --config-name recipe \
  "task=$task" "algo=$algo" "variant=$variant" "$@"
