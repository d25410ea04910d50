#!/usr/bin/env bash
# Start the simulated user's OpenAI-compatible server and wait until it is healthy.
#   launch/user_server.sh [GPUS] [PORT]          e.g. launch/user_server.sh 7 8000
# GPUS: CUDA_VISIBLE_DEVICES for the server (default 7); PORT (default 8000).
# AREW_USER_MODEL (default Qwen/Qwen2.5-14B-Instruct) is served under that name, with tensor
# parallelism over the given GPUs. AREW_USER_SERVER_CMD replaces the vLLM command (it gets
# the port in $PORT and the model in $MODEL). The server keeps running in the background;
# its log and PID are in ${AREW_RUN_DIR:-runs}/user_server/. The last line printed is the base
# URL to put in AREW_USER_URL (recipes/train.sh does this itself).
# Tool calling (the tau2-dual customer operates the phone through OpenAI tool calls with
# tool_choice="auto"): vLLM runs with --enable-auto-tool-choice --tool-call-parser
# ${AREW_USER_TOOL_PARSER:-hermes} (hermes suits Qwen2.5; e.g. llama3_json for Llama 3.x);
# AREW_USER_TOOL_PARSER=none leaves tool calling off (MediQ and FloDial do not need it).
# AREW_USER_MAX_MODEL_LEN (default 16384): the customer's prompt and 30 tool schemas take about 4k
# tokens before a 22-turn conversation starts.
set -euo pipefail
gpus=${1:-7}
port=${2:-8000}
export PORT=$port MODEL=${AREW_USER_MODEL:-Qwen/Qwen2.5-14B-Instruct}
tp=$(awk -F, '{print NF}' <<<"$gpus")
run_dir=${AREW_RUN_DIR:-runs}/user_server
mkdir -p "$run_dir"
tool_parser=${AREW_USER_TOOL_PARSER:-hermes}
tool_flags=""
if [ "$tool_parser" != none ]; then
  tool_flags=" --enable-auto-tool-choice --tool-call-parser $tool_parser"
fi
default_cmd='vllm serve "$MODEL" --served-model-name "$MODEL" --port "$PORT" --tensor-parallel-size '"$tp"' --gpu-memory-utilization 0.9 --max-model-len '"${AREW_USER_MAX_MODEL_LEN:-16384}""$tool_flags"
CUDA_VISIBLE_DEVICES=$gpus nohup bash -c "exec ${AREW_USER_SERVER_CMD:-$default_cmd}" >"$run_dir/server.log" 2>&1 &
pid=$!
echo "$pid" >"$run_dir/server.pid"
deadline=$((SECONDS + ${AREW_USER_SERVER_TIMEOUT:-900}))
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "user server exited; last log lines:" >&2; tail -n 20 "$run_dir/server.log" >&2; exit 1
  fi
  if (( SECONDS > deadline )); then
    echo "user server not healthy after ${AREW_USER_SERVER_TIMEOUT:-900}s; see $run_dir/server.log" >&2
    kill "$pid"; exit 1
  fi
  sleep 2
done
echo "user server healthy (pid $pid, model $MODEL, GPUs $gpus)" >&2
host=$(hostname -I 2>/dev/null | awk '{print $1}' || true)
echo "http://${host:-127.0.0.1}:$port/v1"
