#!/usr/bin/env bash
# Submit a run to a running Ray cluster, stream its logs, and exit with its outcome.
#   launch/submit_ray_job.sh TASK ALGO VARIANT [Hydra overrides]   the job runs recipes/train.sh (see there)
#   launch/submit_ray_job.sh --smoke [arew smoke options]          the job runs `arew smoke --cluster` (CPU clusters, tests)
# RAY_ADDRESS: the cluster's dashboard (default http://127.0.0.1:8265); AREW_JOB_ID: the submission id
# (default arew-<time>-<pid>). The job's runtime environment:
#   working_dir  this project folder, without .git, .venv, data/, runs/, outputs/ (Ray also honours .gitignore);
#                every worker runs in (and imports arew from) its own copy of it
#   env_vars     VERL_USE_EXTERNAL_MODULES=arew.verl_plugin (registers the plugin in every verl process,
#                also where the project is not pip-installed), AREW_USER_SERVICE (default ray: the user's
#                server is started inside the cluster, see arew/serving), every AREW_* variable set here,
#                and the variables named in AREW_JOB_ENV (e.g. "WANDB_API_KEY HF_TOKEN"; they show in the dashboard)
# The cluster's Python needs verl and the project's dependencies (pip install -e . on every node, or one image).
# The data is prepared by the job on the node that runs it, in AREW_DATA_DIR: with more than one node, make it
# a folder every node can read (shared storage), as verl's checkpoint folder must be.
# Exit status: 0 when the job SUCCEEDED, 1 otherwise. Ctrl-C or SIGTERM stops the job (and its user server).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
address=${RAY_ADDRESS:-http://127.0.0.1:8265}
if [ "${1:-}" = --smoke ]; then
  shift
  entry=(python -m arew.cli smoke --cluster "$@")
else
  if [ $# -lt 3 ]; then
    sed -n '2,3p' "$0"; exit 2
  fi
  entry=(bash recipes/train.sh "$@")
fi
export AREW_USER_SERVICE=${AREW_USER_SERVICE:-ray}
case ${AREW_DATA_DIR:-data} in
  /*) ;;
  *) echo "submit_ray_job: AREW_DATA_DIR=${AREW_DATA_DIR:-data} is relative: the data is prepared in the job's working directory; on more than one node set it to shared storage" >&2 ;;
esac
runtime_env=$(python - "$root" <<'EOF'
import json, os, sys
env = {key: value for key, value in os.environ.items() if key.startswith("AREW_") and key != "AREW_JOB_ID"}
for key in os.environ.get("AREW_JOB_ENV", "").split():
    if key in os.environ:
        env[key] = os.environ[key]
env.setdefault("VERL_USE_EXTERNAL_MODULES", "arew.verl_plugin")
excludes = [".git", ".venv", "/data/", "/runs/", "/outputs/", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis"]
print(json.dumps({"working_dir": sys.argv[1], "excludes": excludes, "env_vars": env}))
EOF
)
job_id=${AREW_JOB_ID:-arew-$(date +%Y%m%d-%H%M%S)-$$}
stop_job() {
  echo "submit_ray_job: stopping job $job_id" >&2
  ray job stop --address "$address" "$job_id" >&2 || true
  exit 1
}
trap stop_job INT TERM
echo "submit_ray_job: job $job_id at $address: ${entry[*]}" >&2
# the CLI streams the logs until the job ends; its own exit status does not tell a stopped job from a finished one
ray job submit --address "$address" --submission-id "$job_id" --runtime-env-json "$runtime_env" -- "${entry[@]}" &
wait $! || true
status=$(python -c 'import sys; from ray.job_submission import JobSubmissionClient as C; print(C(sys.argv[1]).get_job_status(sys.argv[2]).value)' "$address" "$job_id")
echo "submit_ray_job: job $job_id $status" >&2
[ "$status" = SUCCEEDED ]
