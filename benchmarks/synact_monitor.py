"""Cost of the SynAct monitor (arew.core.synact) next to the advantage stage it runs in.

    python benchmarks/synact_monitor.py [--batch 256] [--decisions 20] [--group 8] [--length 4096] [--repeats 15]

Builds a GRPO batch of ``--batch`` episodes (``--group`` rollouts per prompt) of ``--decisions``
decisions each, whose actions are drawn from three choices per decision, so that rollouts of a
prompt share their first states and then part ways, as real rollouts do. Times, per step: the
monitor alone (validating the decision keys as the trainer does, then the points, MI, critiques
and statistics), and verl's ``compute_advantage`` with ``arew_grpo`` with the monitor off and on
(records validation included in both), interleaved round by round; prints medians in ms.
"""

from __future__ import annotations

import argparse
import hashlib
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
from arew.core.synact import collect_decision_keys, group_ids, synact
from arew.verl_plugin.estimators import AdvantageBatch, advantage_batch


def _key(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") & (2**63 - 1)


def build_batch(batch: int, decisions: int, group: int, length: int, seed: int = 0):
    rng = random.Random(seed)
    mask = torch.zeros(batch, length)
    records, keys = [], []
    for i in range(batch):
        bounds = sorted(rng.sample(range(1, length), 2 * decisions))
        spans = [(bounds[2 * k], bounds[2 * k + 1]) for k in range(decisions)]
        for start, end in spans:
            mask[i, start:end] = 1
        channels = ["as", "bt"] * (decisions // 2) + ["as"] * (decisions % 2)
        records.append(make_record(spans, channels, [rng.choice([-1, 0, 1]) for _ in spans]))
        prefix, states, actions = f"prompt{i // group}".encode(), [], []
        for channel in channels:
            action = rng.randrange(3)
            states.append(_key(prefix))
            actions.append(action)
            prefix += f"|{channel}:{action}:{rng.randrange(2) if channel == 'as' else ''}".encode()
        keys.append({"state": states, "action": actions})
    rewards = torch.zeros(batch, length)
    last = length - 1 - mask.flip(1).argmax(1)
    rewards[torch.arange(batch), last] = torch.randint(0, 2, (batch,)).float()
    td = TensorDict({"token_level_rewards": rewards, "response_mask": mask}, batch_size=batch)
    uids = np.array([f"p{i // group}" for i in range(batch)], dtype=object)
    return DataProto(batch=td, non_tensor_batch={"uid": uids}), records, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    data, records, keys = build_batch(args.batch, args.decisions, args.group, args.length)
    lengths = [args.length] * args.batch
    outcome = data.batch["token_level_rewards"].sum(-1).double().numpy()
    uids = data.non_tensor_batch["uid"]

    def config(monitor: bool):
        return OmegaConf.create({"norm_adv_by_std_in_grpo": True, "arew": {"synact": {"monitor": monitor}}})

    def stage(monitor: bool):
        algorithm = config(monitor)

        def run():
            segments = collect_segments(records, lengths)
            context = AdvantageBatch(segments=segments, step=0)
            if monitor:
                context.decision_keys = collect_decision_keys(keys, segments)
            with advantage_batch(context):
                compute_advantage(data, adv_estimator="arew_grpo", config=algorithm)
            return context.metrics

        return run

    segments = collect_segments(records, lengths)

    def monitor_only():
        return synact(segments, collect_decision_keys(keys, segments), group_ids(uids), outcome).stats

    runs = {"stage, monitor off": stage(False), "stage, monitor on": stage(True), "monitor alone": monitor_only}
    for fn in runs.values():
        fn()  # warm-up
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.repeats):
        names = list(runs) if round_ % 2 == 0 else list(runs)[::-1]
        for name in names:
            start = time.perf_counter()
            runs[name]()
            samples[name].append(time.perf_counter() - start)
    stats = monitor_only()
    print(
        f"batch {args.batch} episodes x {args.decisions} decisions ({args.group} rollouts per prompt), "
        f"{args.length} response tokens; torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} rounds"
    )
    print(
        f"decision points: as {stats['arew/synact/as/decision_points']:.0f}, bt {stats['arew/synact/bt/decision_points']:.0f}; "
        f"outcome-constant share as {stats['arew/synact/as/outcome_constant_share']:.2f}"
    )
    median = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    for name, value in median.items():
        print(f"  {name:20s} {value:8.2f} ms per step (median; best {min(samples[name]) * 1000:.2f})")
    added = statistics.median(on - off for on, off in zip(samples["stage, monitor on"], samples["stage, monitor off"]))
    print(f"monitor's added cost in the stage: {added * 1000:.2f} ms per step ({added * 1000 / median['stage, monitor off']:.1%} of the stage)")


if __name__ == "__main__":
    main()
