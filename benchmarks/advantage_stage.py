"""Advantage stage cost: AReW over GAE/GRPO versus verl's plain GAE/GRPO on the same batch.

    python benchmarks/advantage_stage.py [--batch 512] [--length 8192] [--repeats 15] [--no-gae] [--no-credit]

Builds a realistic multi-turn batch (10-20 decisions per trajectory, environment tokens
between them), then times verl's ``compute_advantage`` for each estimator. The AReW timings
include validating and flattening the critique records, as the trainer does every step.

Each round times every estimator once, plain and AReW back to back (in alternating order
from round to round), so load from other processes hits both sides of a pair alike. The
figures are medians over the rounds: of each side's time, and of each round's added cost
(AReW minus plain, from the same round) and its ratio to plain GRPO.

The credit-assignment baselines of :mod:`arew.core.credit` (GiGPO, turn-level GAE, turn-level
GRPO) are timed in the same rounds, each alone (``algorithm.arew.channels=off``) and with AReW
on top, against verl's GRPO (``--no-credit`` leaves them out). GiGPO's state keys make the
first two decisions of a prompt's rollouts shared states, the rest distinct.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from batches import decision_keys, multi_turn_batch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

import arew.verl_plugin  # noqa: F401
from arew.core import collect_segments
from arew.reporting.markdown_blocks import replace_block
from arew.verl_plugin.estimators import AdvantageBatch, advantage_batch


def build_batch(batch: int, length: int, seed: int = 0):
    """The multi-turn batch (:func:`batches.multi_turn_batch`) as verl's DataProto, and its records."""
    made = multi_turn_batch(batch, length, seed)
    td = TensorDict(
        {"token_level_rewards": made.token_level_rewards, "response_mask": made.response_mask, "values": made.values},
        batch_size=batch,
    )
    uids = np.array([f"p{group}" for group in made.groups], dtype=object)
    return DataProto(batch=td, non_tensor_batch={"uid": uids}), made.records


PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:advantage-stage"


def time_rounds(pairs: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each function, ``repeats`` rounds; each pair runs back to back, alternating its order."""
    for plain, reweighted in pairs.values():
        plain(), reweighted()  # warm-up
    samples: dict[str, list[float]] = {}
    for round_ in range(repeats):
        for name, (plain, reweighted) in pairs.items():
            order = [(name, plain), ("arew_" + name, reweighted)]
            for label, fn in order if round_ % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                fn()
                samples.setdefault(label, []).append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--no-gae", action="store_true", help="time GRPO only (GAE's Python loop takes about 1 s a call)")
    parser.add_argument("--no-credit", action="store_true", help="leave out GiGPO, turn-level GAE and turn-level GRPO")
    parser.add_argument("--publish", action="store_true", help="write the output into docs/reference/benchmarks.md")
    args = parser.parse_args()
    lines: list[str] = []

    def out(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    data, records = build_batch(args.batch, args.length)
    lengths = [args.length] * args.batch
    algorithm = OmegaConf.create({"gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": True, "arew": {}})

    alone = OmegaConf.create({**OmegaConf.to_container(algorithm), "arew": {"channels": "off"}})
    keys = decision_keys(records)

    def plain(estimator):
        return lambda: compute_advantage(data, adv_estimator=estimator, config=algorithm)

    def arew(estimator, config=algorithm):
        def run():
            segments = collect_segments(records, lengths)
            context = AdvantageBatch(segments=segments, step=0, values=data.batch["values"], decision_keys=keys)
            with advantage_batch(context):
                compute_advantage(data, adv_estimator=estimator, config=config)

        return run

    bases = ["grpo"] if args.no_gae else ["gae", "grpo"]
    credit = [] if args.no_credit else ["gigpo", "turn_gae", "turn_grpo"]
    out(f"batch {args.batch} x {args.length} response tokens, {sum(len(r['start']) for r in records)} decisions")
    out(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} interleaved rounds")
    pairs = {base: (plain(base), arew("arew_" + base)) for base in bases}
    pairs |= {base: (arew("arew_" + base, alone), arew("arew_" + base)) for base in credit}  # alone, then under AReW
    samples = time_rounds(pairs, args.repeats)
    median = {name: statistics.median(values) for name, values in samples.items()}
    best = {name: min(values) for name, values in samples.items()}
    for base in bases:
        arew_name = "arew_" + base
        out(
            f"  {base:6s} {median[base] * 1000:8.1f} ms (best {best[base] * 1000:6.1f})"
            f"    {arew_name:11s} {median[arew_name] * 1000:8.1f} ms (best {best[arew_name] * 1000:6.1f})"
        )
    added = [a - p for a, p in zip(samples["arew_grpo"], samples["grpo"])]
    ratios = sorted(a / p for a, p in zip(added, samples["grpo"]))
    if not args.no_gae:
        gae_ratio = statistics.median(a / p for a, p in zip(samples["arew_gae"], samples["gae"]))
        out(f"arew_gae / gae   = {gae_ratio:.3f}  (median over rounds; target <= 1.10, GAE's Python loop makes it noisy)")
    of_gae = "" if args.no_gae else f" = {statistics.median(added) / median['gae']:.1%} of plain GAE"
    out(f"AReW added cost  = {statistics.median(added) * 1000:.1f} ms per step{of_gae} (median over rounds of arew_grpo - grpo)")
    out(f"added / grpo     = {statistics.median(added) / median['grpo']:.2f}  (medians; target <= 1.00: AReW costs at most verl's own GRPO)")
    out(f"  best rounds    = {(best['arew_grpo'] - best['grpo']) / best['grpo']:.2f}  ({(best['arew_grpo'] - best['grpo']) * 1000:.1f} ms / {best['grpo'] * 1000:.1f} ms)")
    quartiles = f"{ratios[len(ratios) // 4]:.2f} / {statistics.median(ratios):.2f} / {ratios[(3 * len(ratios)) // 4]:.2f}"
    out(f"  per round      : min {ratios[0]:.2f}, quartiles {quartiles}, max {ratios[-1]:.2f}")
    for base in credit:
        out(
            f"  {base:9s} alone {median[base] * 1000:8.1f} ms = {median[base] / median['grpo']:5.2f} x verl's grpo"
            f"    under AReW {median['arew_' + base] * 1000:8.1f} ms = {median['arew_' + base] / median['grpo']:5.2f} x"
        )

    if args.publish:
        block = "\n".join(["```", *lines, "```", "", f"_written by `python benchmarks/advantage_stage.py --publish` ({platform.machine()}, load average {os.getloadavg()[0]:.1f} at the end)_"]) + "\n"
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))


if __name__ == "__main__":
    main()
