"""Advantage stage cost: AReW over GAE/GRPO versus verl's plain GAE/GRPO on the same batch.

    python benchmarks/advantage_stage.py [--batch 512] [--length 8192] [--repeats 5]

Builds a realistic multi-turn batch (10-20 decisions per trajectory, environment tokens
between them), then times verl's ``compute_advantage`` for each estimator. The AReW timings
include validating and flattening the critique records, as the trainer does every step.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

import arew.verl_plugin  # noqa: F401
from arew.core import collect_segments, make_record
from arew.verl_plugin.estimators import AdvantageBatch, advantage_batch


def build_batch(batch: int, length: int, seed: int = 0):
    rng = random.Random(seed)
    mask = torch.zeros(batch, length)
    records = []
    for i in range(batch):
        turns = rng.randint(10, 20)
        bounds = sorted(rng.sample(range(1, length), 2 * turns))
        spans = [(bounds[2 * k], bounds[2 * k + 1]) for k in range(turns)]
        for start, end in spans:
            mask[i, start:end] = 1  # model tokens; the gaps are environment/user tokens
        labels = [rng.choice([-1, 0, 1]) for _ in spans]
        records.append(make_record(spans, ["as", "bt"] * (turns // 2) + ["as"] * (turns % 2), labels))
    rewards = torch.zeros(batch, length)
    last = length - 1 - mask.flip(1).argmax(1)
    rewards[torch.arange(batch), last] = torch.randint(0, 2, (batch,)).float()
    td = TensorDict(
        {"token_level_rewards": rewards, "response_mask": mask, "values": torch.randn(batch, length) * mask},
        batch_size=batch,
    )
    uids = np.array([f"p{i // 4}" for i in range(batch)], dtype=object)
    return DataProto(batch=td, non_tensor_batch={"uid": uids}), records


def time_interleaved(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds per function, running them in turn each round so drift hits all alike."""
    for fn in fns.values():
        fn()  # warm-up
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    data, records = build_batch(args.batch, args.length)
    lengths = [args.length] * args.batch
    algorithm = OmegaConf.create({"gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": True, "arew": {}})

    def plain(estimator):
        return lambda: compute_advantage(data, adv_estimator=estimator, config=algorithm)

    def arew(estimator):
        def run():
            segments = collect_segments(records, lengths)
            with advantage_batch(AdvantageBatch(segments=segments, step=0, values=data.batch["values"])):
                compute_advantage(data, adv_estimator=estimator, config=algorithm)

        return run

    print(f"batch {args.batch} x {args.length} response tokens, {sum(len(r['start']) for r in records)} decisions")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} interleaved rounds")
    results = time_interleaved(
        {"gae": plain("gae"), "arew_gae": arew("arew_gae"), "grpo": plain("grpo"), "arew_grpo": arew("arew_grpo")},
        args.repeats,
    )
    for name, seconds in results.items():
        print(f"  {name:10s} {seconds * 1000:9.1f} ms")
    added = results["arew_grpo"] - results["grpo"]
    print(f"arew_gae / gae   = {results['arew_gae'] / results['gae']:.3f}  (target <= 1.10; GAE's Python loop makes this ratio noisy)")
    print(f"arew_grpo / grpo = {results['arew_grpo'] / results['grpo']:.3f}")
    print(f"AReW added cost  = {added * 1000:.1f} ms per step = {added / results['gae']:.1%} of plain GAE")
    print(f"added / grpo     = {added / results['grpo']:.2f}  (target <= 1.00: AReW costs at most verl's own GRPO)")


if __name__ == "__main__":
    main()
