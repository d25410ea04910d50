"""Running verl's real ``main_ppo`` from a test (``arew smoke``) and reading what it wrote: the advantage dumps and
the rollout rows. Shared by tests/e2e and tests/vllm."""

from __future__ import annotations

import json

import torch

from arew.verl_plugin import smoke

# stable request ids reach the rollout server and the critique noise has a seed: a run replays
DETERMINISTIC = ("actor_rollout_ref.rollout.full_determinism=true", "algorithm.arew.noise.seed=3")
TIMEOUT = 900  # seconds; a guard against a hung run, not a timing assertion


def run_smoke(folder, *overrides, **kwargs) -> smoke.SmokeRun:
    """``arew smoke`` in ``folder`` with these Hydra overrides (``kwargs``: :func:`arew.verl_plugin.smoke.run`'s), which must succeed."""
    result = smoke.run(out=folder, overrides=list(overrides), timeout=TIMEOUT, **kwargs)
    assert result.returncode == 0, f"main_ppo failed, log tail:\n{result.log_path.read_text()[-6000:]}"
    return result


def advantage_dump(result: smoke.SmokeRun, step: int) -> dict:
    """One step's advantage dump, in the trainer's batch order (the critique noise is drawn in that order)."""
    return torch.load(result.folder / "dumps" / f"advantages_step{step}.pt", weights_only=False)


def by_episode(dump: dict, order: list[str]) -> dict:
    """The dump's samples rearranged into ``order`` of episode names (verl's sample keys are random uids)."""
    where = {name: i for i, name in enumerate(dump["episodes"])}
    assert sorted(where) == sorted(order)
    return {name: [dump[name][where[e]] for e in order] for name in ("advantages", "response_mask", "records")}


def rollout_rows(result: smoke.SmokeRun, split: str) -> list[dict]:
    return [json.loads(line) for line in (result.folder / "rollouts" / f"{split}.jsonl").read_text().splitlines()]
