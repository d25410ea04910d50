"""``arew eval`` throughput against an instant model, and its overhead per turn beside the agent loop's.

    python benchmarks/eval_throughput.py [--episodes 64] [--concurrency 64]

Three runs of the same scripted PE episodes (valid turns from ``agent_loop_overhead.py``), all
episodes in flight at once:

- the ``arew_agent`` verl loop with an instant token server (the baseline, measured here);
- ``arew eval``'s runner with an in-process model that answers instantly: the driver, the chat
  transcript, the environment, critiques and the JSONL record, nothing else;
- the same runner against a loopback OpenAI-compatible HTTP server that answers instantly
  (``EndpointModel``; the server runs in its own process): adds the client's JSON and HTTP.

Per turn = wall (and CPU) time / agent turns. The target is the agent loop's overhead (< 1 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

from agent_loop_overhead import loop_setup, run_loop, scripted_turns
from aiohttp import web

from arew.eval.endpoint import EndpointModel
from arew.eval.model import Completion
from arew.eval.runner import EvalConfig, evaluate
from arew_preference.data import build_rows


class ScriptBook:
    """Each episode's scripted turns, found from its conversation (the first user message is unique per row)."""

    def __init__(self, rows):
        self.turns = {row["prompt"][-1]["content"]: scripted_turns(row["extra_info"]) for row in rows}

    def reply(self, messages) -> str:
        opening = next(m["content"] for m in messages if m["role"] == "user")
        return self.turns[opening][sum(m["role"] == "assistant" for m in messages)]


class InstantModel:
    name = "instant"

    def __init__(self, book: ScriptBook):
        self.book = book

    async def complete(self, messages, params):
        return Completion(self.book.reply(messages))


def serve(task: str, episodes: int, port_queue) -> None:
    """The instant endpoint, in its own process: its JSON and HTTP work is not the evaluation's."""
    book = ScriptBook(build_rows(task, episodes, 1, 1, seed=0)["train"])

    async def completions(request: web.Request) -> web.Response:
        payload = await request.json()
        text = book.reply(payload["messages"])
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 0, "completion_tokens": len(text) // 4}})  # fmt: skip

    async def run() -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_queue.put(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(run())


async def timed_eval(model, rows, config) -> tuple[float, float, int, int]:
    """(wall s, CPU s, agent turns, episodes) of one evaluation into a fresh folder."""
    with tempfile.TemporaryDirectory() as folder:
        wall, cpu = time.perf_counter(), time.process_time()
        records = await evaluate(model, rows, config, Path(folder))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(r["failed"] is None for r in records), [r["failed"] for r in records if r["failed"]][:1]
    return wall, cpu, sum(len(r["turns"]) for r in records), len(records)


def endpoint_eval(task: str, rows, config):
    ports = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(task, len(rows), ports), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
        model = EndpointModel.from_options(url, "instant", api_key_env=None, concurrency=config.concurrency)
        return asyncio.run(timed_eval(model, rows, config))
    finally:
        server.terminate()
        server.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--task", default="pe-g-s2")
    args = parser.parse_args()
    rows = build_rows(args.task, args.episodes, 1, 1, seed=0)["train"]
    book = ScriptBook(rows)
    tokenizer, loop_config = loop_setup(rows)
    config = EvalConfig(response_length=16384, concurrency=args.concurrency)
    wall, cpu, turns = asyncio.run(run_loop(rows, tokenizer, loop_config, concurrent=True))
    results = {"arew_agent loop (baseline)": (wall, cpu, turns, len(rows))}
    results["arew eval, in-process model"] = asyncio.run(timed_eval(InstantModel(book), rows, config))
    results["arew eval, HTTP endpoint"] = endpoint_eval(args.task, rows, config)
    base = results["arew_agent loop (baseline)"][0] / results["arew_agent loop (baseline)"][2]
    print(f"task {args.task}: {args.episodes} episodes, {args.concurrency} in flight; per agent turn, the model answering instantly:")
    for name, (wall, cpu, turns, episodes) in results.items():
        per_turn = wall / turns
        print(f"  {name:28s} wall {per_turn * 1000:.3f} ms, CPU {cpu / turns * 1000:.3f} ms, "
              f"{episodes / wall:7.1f} episodes/s  ({turns} turns; x{per_turn / base:.2f} the loop's)")  # fmt: skip
    print(json.dumps({name: {"ms_per_turn": r[0] / r[2] * 1000, "episodes_per_s": r[3] / r[0]} for name, r in results.items()}))


if __name__ == "__main__":
    main()
