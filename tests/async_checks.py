"""What a colocate_async run must show, whichever rollout engine generated it (tests/e2e, tests/vllm).

The run is sized so that partial rollouts happen and reach training: two warm-up batches keep 12 prompts'
episodes in flight, the engine generates at most four requests at a time (so episodes finish one after
another, not in lockstep), turns are long enough that a generation is almost always running when a step's
sampling ends, and four steps give the episodes cut at one step's end the next steps to be trained in. verl's
rollout correction (token-level importance weights) is on, as a user of the async trainer would run it.
"""

from __future__ import annotations

import json

import torch
from transformers import AutoTokenizer

from arew.metrics.rollouts import truncate

STEPS = 4
LIMIT = 4000  # characters of a turn's text kept in the rollout rows
ASYNC_OVERRIDES = (
    "trainer.v1.trainer_mode=arew_colocate_async",
    "trainer.v1.colocate_async.num_warmup_batches=2",
    "actor_rollout_ref.rollout.max_num_seqs=4",
    "arew_agent.max_tokens_per_turn=48",
    "algorithm.rollout_correction.rollout_is=token",
    "algorithm.rollout_correction.rollout_is_threshold=2.0",
    "arew_rollouts.per_step=8",  # every episode of a step as a rollout row, to read each decision's text
    f"arew_rollouts.max_text_chars={LIMIT}",
)


def async_overrides(folder) -> list[str]:
    """The run's overrides, with its advantage dumps in ``folder/dumps`` and a large learning rate."""
    return [*ASYNC_OVERRIDES, f"algorithm.arew.dump_dir={folder / 'dumps'}", "actor_rollout_ref.actor.optim.lr=0.05"]


def check_steps(run) -> None:
    """Every step trained with AReW's stage, versions on every decision, verl's rollout correction logged."""
    assert [s["step"] for s in run.steps] == list(range(1, STEPS + 1))
    for step in run.steps:
        for key in ("arew/as/pos", "arew/bt/neg", "arew/abs_coef_per_token", "episode/decisions/mean", "timing_s/update_weights"):
            assert key in step, key
        assert step["episode/failed/count"] == 0 and step["arew/records_dropped"] == 0
        assert step["arew/off_policy/malformed_samples"] == 0 and step["arew/off_policy/decisions_without_version"] == 0
        assert step["arew/off_policy/decisions"] == step["arew/decisions"]
        assert 0 < step["rollout_corr/rollout_is_mean"] < float("inf")


def check_staleness_agrees_with_verl(run) -> None:
    """A trajectory's oldest version is its oldest decision's; each decision is at least as stale as its trajectory."""
    for step in run.steps:
        assert step["arew/off_policy/decision_staleness_worst/max"] == step["training/off_policy/trajectory_staleness_worst/max"]
        assert step["arew/off_policy/decision_staleness/min"] >= step["training/off_policy/trajectory_staleness/min"]
        assert step["arew/off_policy/decision_staleness/max"] >= step["training/off_policy/trajectory_staleness/max"]
        assert step["arew/off_policy/decision_staleness/max"] <= step["arew/off_policy/decision_staleness_worst/max"]
    assert sum(step["arew/off_policy/spanning_decisions"] for step in run.steps) > 0  # partial rollouts happened
    assert any(step["training/off_policy/trajectory_staleness_worst/max"] >= 1 for step in run.steps)


def check_resumed_decisions(run) -> int:
    """Decision by decision: a generation cut by a weight sync and resumed is one span of agent tokens whose text
    is the turn the environment critiqued, with one critique and one coefficient, under two or more versions.
    Returns how many such decisions were checked (at least one)."""
    tokenizer = AutoTokenizer.from_pretrained(run.folder / "model")
    rows = [json.loads(line) for line in (run.folder / "rollouts" / "train.jsonl").read_text().splitlines()]
    rows = {(row["step"], row["episode"]): row for row in rows}
    checked = 0
    for step in range(1, STEPS + 1):
        dump = torch.load(run.folder / "dumps" / f"advantages_step{step}.pt", weights_only=False)
        for name, record, versions, mask, ids, advantages in zip(
            dump["episodes"], dump["records"], dump["decision_versions"], dump["response_mask"], dump["responses"], dump["advantages"]
        ):
            if name is None:  # verl's padding
                continue
            assert len(versions["min"]) == len(versions["max"]) == len(record["start"])
            turns = rows[(step, name)]["turns"]
            assert len(turns) == len(record["start"])  # one row turn per decision: the cut made none extra
            # GRPO's outcome advantage is one number per trajectory, and AReW adds each decision's coefficient to its span
            base = [float(advantages[start]) - turn["coefficient"] for start, turn in zip(record["start"], turns)]
            for i, (start, end, low, high) in enumerate(zip(record["start"], record["end"], versions["min"], versions["max"])):
                assert low <= high <= step - 1  # step s trains the policy of version s - 1: nothing newer exists
                if high == low:
                    continue  # generated under one version (cut decisions resume under the next; one cut again spans more)
                assert end > start and bool(mask[start:end].all())  # one span, all of it the agent's tokens
                text = tokenizer.decode(ids[start:end].tolist(), skip_special_tokens=True)
                assert turns[i]["agent"] == truncate(text, LIMIT)  # the text the environment critiqued
                assert turns[i]["critique"] == record["label"][i]
                span = advantages[start:end]
                assert torch.allclose(span, span[0].expand_as(span))  # one coefficient over the whole span, not two parts
                assert max(base) - min(base) < 1e-5  # and it is this decision's coefficient on the trajectory's advantage
                checked += 1
    assert checked > 0
    return checked
