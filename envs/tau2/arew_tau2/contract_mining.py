"""Mining tau2's interface contracts (:mod:`arew_tau2.contracts`) from the audit's oracles.

``python -m arew_tau2.contract_mining mine --out envs/tau2/arew_tau2/data/tau2_contracts.json`` plays the oracle
policies of :mod:`arew_tau2.audit` on tau2's train split, solo and dual, keeps the episodes that reached
the official reward and writes the contracts they all keep, with their support. It lives in the audit
layer because the oracles do; the source that reads the file does not need them.
"""

from __future__ import annotations

import argparse
import asyncio

from arew.audit.runner import play_policy
from arew.critiques.base import Decision, EpisodeContext
from arew.envs.registry import make_env
from arew_tau2.audit import AUDITS
from arew_tau2.contracts import (
    KINDS,
    MINED_FROM,
    MINED_MIN_SUPPORT,
    Trajectory,
    mine_contracts,
    trajectory_of,
    write,
)


def oracle_trajectories(split: str = "train") -> list[Trajectory]:
    """The audit's oracles played on tau2's ``split`` tasks (solo and dual), the episodes with official reward 1."""
    from arew_tau2.tasks import build_splits  # pandas, through the data preparation: the command's alone

    found = []
    for audit in AUDITS:
        for row in build_splits(audit.task, "base")[split]:
            row = {**row, "reward": "official"}
            reward, log = asyncio.run(play_policy(audit, audit.competent(), row))
            if reward == 1.0:
                messages = tuple(make_env(audit.task, row, 0).initial_messages())
                decisions = tuple(Decision(*turn) for turn in zip(log.texts, log.channels, log.replies, log.labels))
                found.append(trajectory_of(EpisodeContext(audit.task, row, messages, decisions)))
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m arew_tau2.contract_mining", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    mine = commands.add_parser("mine", help="mine the contracts of the oracles' successful episodes on tau2's train split")
    mine.add_argument("--out", required=True, help="the contract file to write")
    mine.add_argument("--min-support", type=int, default=MINED_MIN_SUPPORT, help="keep contracts with at least this support")
    args = parser.parse_args(argv)
    contracts = mine_contracts(oracle_trajectories("train"), args.min_support, MINED_FROM)
    write(contracts, args.out)
    kinds = {kind: sum(c.kind == kind for c in contracts.contracts) for kind in KINDS}
    print(f"{len(contracts.contracts)} contracts from {dict(contracts.trajectories)} trajectories: {kinds} -> {args.out}")


if __name__ == "__main__":
    main()
