"""The ``hf`` rollout server's throughput against the number of requests in flight: does batching pay?

    python benchmarks/hf_rollout_throughput.py [--models tiny,smollm2] [--concurrency 1,2,4,8] [--requests 16] [--publish]

For each model and each concurrency C, ``--requests`` generations (a PE-G-sized chat prompt of about
1,400 tokens, then ``--max-tokens`` new tokens at temperature 1) are sent C at a time to one
:class:`~arew.verl_plugin.cpu.hf_rollout.HFRolloutServer` in this process, twice: with batching
(``max_batch=C``, what the CPU backend does) and one request at a time (``max_batch=1``, as under
``rollout.full_determinism`` and as the server did before it batched), the baseline measured in the
same run. No cap on a batch's padded prompt tokens here (the backend's is ``rollout.max_num_batched_tokens``,
8,192 by default: five of these prompts). Prints new tokens per second and the speed-up; ``--publish`` writes the table into docs/reference/benchmarks.md
between ``<!-- bench:hf-rollout-throughput:start -->`` and ``:end -->``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from arew.reporting.markdown_blocks import replace_block
from arew.verl_plugin.cpu.hf_rollout import HFRolloutServer

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:hf-rollout-throughput"
MODELS = ("tiny", "smollm2")


def model_folder(name: str, scratch: Path) -> Path:
    if name == "smollm2":
        from arew.eval.default_model import default_model_folder

        return default_model_folder()
    from arew.verl_plugin.smoke import tiny_model

    return tiny_model(scratch / "tiny")


def prompts(server: HFRolloutServer, count: int, words: int = 900) -> list[list[int]]:
    """Distinct chat prompts of similar length (different lengths, as the agent loop's are)."""
    out = []
    for i in range(count):
        text = " ".join(f"item {j % 7} costs {j % 5} and weighs {(i + j) % 3}" for j in range(words // 8 + i))
        messages = [{"role": "user", "content": text}]
        out.append(server.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))
    return out


async def measure(server: HFRolloutServer, batch: list[list[int]], concurrency: int, max_tokens: int) -> tuple[float, int]:
    """Seconds and new tokens for every prompt, ``concurrency`` in flight at a time."""
    slots = asyncio.Semaphore(concurrency)
    params = {"temperature": 1.0, "max_tokens": max_tokens}

    async def one(i: int, prompt: list[int]) -> int:
        async with slots:
            return len((await server.generate(prompt, params, f"r{i}")).token_ids)

    started = time.perf_counter()
    tokens = await asyncio.gather(*(one(i, p) for i, p in enumerate(batch)))
    return time.perf_counter() - started, sum(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--concurrency", default="1,2,4,8", help="requests in flight, comma-separated")
    parser.add_argument("--requests", type=int, default=16, help="generations per measurement")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--publish", action="store_true", help="write the table into docs/reference/benchmarks.md between its markers")
    args = parser.parse_args()
    models = args.models.split(",")
    if not set(models) <= set(MODELS):
        raise SystemExit(f"--models: choose from {', '.join(MODELS)}; got {args.models}")
    levels = [int(c) for c in args.concurrency.split(",")]
    machine = f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    print(machine, flush=True)
    lines = [f"_{machine}; {args.requests} requests of ~1,400 prompt tokens, up to {args.max_tokens} new tokens each_", ""]
    lines += ["| model | in flight | one at a time (tokens/s) | batched (tokens/s) | speed-up |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for name in models:
            folder = str(model_folder(name, Path(scratch)))
            for concurrency in levels:
                rates = []
                for max_batch in (1, concurrency):
                    server = HFRolloutServer(folder, folder, False, max_model_len=8192, response_length=args.max_tokens, seed=0, max_batch=max_batch)
                    batch = prompts(server, args.requests)
                    asyncio.run(measure(server, batch[:1], 1, 4))  # warm-up, on a loop of its own
                    seconds, tokens = asyncio.run(measure(server, batch, concurrency, args.max_tokens))
                    rates.append(tokens / seconds)
                row = f"| {name} | {concurrency} | {rates[0]:.1f} | {rates[1]:.1f} | {rates[1] / rates[0]:.2f} |"
                lines.append(row)
                print(row, flush=True)
    block = "\n".join(lines) + "\n"
    print("\n" + block)
    if args.publish:
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))


if __name__ == "__main__":
    main()
