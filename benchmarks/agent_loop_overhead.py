"""Agent-loop overhead per turn, without model generation, and PE environment steps per second.

    python benchmarks/agent_loop_overhead.py [--episodes 40] [--task pe-g-s2]

The server answers instantly with pre-tokenised valid turns, so the time measured is the
loop's own work: chat-template merges and token bookkeeping, parsing, the environment step,
critiques and records. verl runs the chat-template merges in a thread pool; one episode at a
time, each turn waits for those hand-offs (wall > CPU); with many episodes in flight, as in
training, the waits overlap and wall time per turn approaches the CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from arew.engines.tiny_models import build_chat_tokenizer
from arew.envs.registry import make_env
from arew.verl_plugin.agent_loop import CritiqueAgentLoop
from arew_preference.data import build_rows


def scripted_turns(info: dict) -> list[str]:
    """A full valid episode: informative-or-not queries over distinct pairs, then beliefs, then the answer."""
    items = np.asarray(info["items"])
    n_items, n_attrs, subset = len(items), items.shape[1], info["subset_size"]
    texts = []
    for t in range(info["max_turns"]):
        i, j = t % n_items, (t + 1 + t // n_items) % n_items
        attrs = ", ".join(str(1 + (t + m) % n_attrs) for m in range(subset)) if subset < n_attrs else None
        query = f"{i + 1}, {j + 1}" + (f" | {attrs}" if attrs else "")
        belief = ", ".join(f"{0.5 + 0.04 * ((t + k) % 5 - 2):.2f}" for k in range(n_attrs))
        texts += [f"<scratch>ask about a trade-off</scratch><interact>{query}</interact>",
                  f"<scratch>shift weights</scratch><interact>{belief}</interact>"]
    return texts + [f"<answer>{', '.join(f'{w:.2f}' for w in info['w_star'])}</answer>"]


class InstantServer:
    def __init__(self, tokenized):
        self.queue = list(tokenized)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        ids = self.queue.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.1] * len(ids))


def make_agent(row, tokenizer, config):
    texts = scripted_turns(row["extra_info"])
    tokenized = [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]
    return CritiqueAgentLoop(
        trainer_config=DictConfigWrap(config), server_manager=InstantServer(tokenized), tokenizer=tokenizer,
        processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data),
    )


def loop_setup(rows):
    """A tokenizer trained on the rows' prompts (realistic token counts) and the loop's config: long budgets."""
    tokenizer = build_chat_tokenizer(extra_text=[m["content"] for row in rows[:20] for m in row["prompt"]], vocab_size=4000)
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 16384, "multi_turn": {}},
                              "model": {"path": "unused", "tokenizer_path": "unused"}},
        "data": {"apply_chat_template_kwargs": {}},
        "arew_agent": {},
    })  # fmt: skip
    return tokenizer, config


async def run_loop(rows, tokenizer, config, concurrent: bool) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, turns) for all episodes, one after another or all at once."""
    agents = [make_agent(row, tokenizer, config) for row in rows]
    episodes = [agent.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"]) for agent, row in zip(agents, rows)]
    wall, cpu = time.perf_counter(), time.process_time()
    if concurrent:
        outputs = await asyncio.gather(*episodes)
    else:
        outputs = [await episode for episode in episodes]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, sum(len(o.extra_fields["arew_turns"]["label"]) for o in outputs)


def env_steps_per_second(rows) -> tuple[float, float]:
    async def episode(row):
        env = make_env(row["extra_info"]["task"], row["extra_info"], row["extra_info"]["seed"])
        texts = scripted_turns(row["extra_info"])
        steps = 0
        start = time.perf_counter()
        for k, text in enumerate(texts[:-1]):
            await env.act(text) if k % 2 == 0 else env.update(text)
            steps += 1
        env.answer(texts[-1])
        step_time = time.perf_counter() - start
        start = time.perf_counter()
        env.proxies()
        return steps + 1, step_time, time.perf_counter() - start

    results = [asyncio.run(episode(row)) for row in rows]
    steps = sum(r[0] for r in results)
    return steps / sum(r[1] for r in results), statistics.mean(r[2] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--task", default="pe-g-s2")
    args = parser.parse_args()
    rows = build_rows(args.task, args.episodes, 1, 1, seed=0)["train"]
    tokenizer, config = loop_setup(rows)
    steps_per_s, summary_s = env_steps_per_second(rows)
    print(f"task {args.task}: {args.episodes} episodes; per turn, excluding generation:")
    for concurrent in (False, True):
        wall, cpu, turns = asyncio.run(run_loop(rows, tokenizer, config, concurrent))
        mode = "all episodes at once" if concurrent else "one episode at a time"
        print(f"  {mode:22s} wall {wall / turns * 1000:.3f} ms, CPU {cpu / turns * 1000:.3f} ms   ({turns} turns; target < 1 ms)")
    print(f"  (included: per-episode summary with PE's Bayesian replay, {summary_s * 1000:.2f} ms per episode)")
    print(f"PE environment alone: {steps_per_s:,.0f} steps/s ({1000 / steps_per_s:.3f} ms per step)")


if __name__ == "__main__":
    main()
