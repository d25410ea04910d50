#!/usr/bin/env bash
# Submit a recipe run to a running Ray cluster:  launch/submit_ray_job.sh TASK ALGO VARIANT [overrides]
# RAY_ADDRESS must point at the cluster's dashboard (e.g. http://head:8265). The project folder is
# shipped as the job's working directory; the cluster's Python must have arew installed (pip install -e .).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec ray job submit --working-dir "$root" \
  --runtime-env-json '{"env_vars": {"AREW_MODEL_PATH": "'"${AREW_MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}"'", "AREW_DATA_DIR": "'"${AREW_DATA_DIR:-data}"'"}}' \
  -- bash recipes/train.sh "$@"
