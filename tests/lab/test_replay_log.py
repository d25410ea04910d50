"""The lab logs the Bayesian-replay diagnostics every training step, over the whole batch: I_AS, the
oracle reward and the self-locking correlations, equal to a fresh replay of the step's episodes, exported
under the trainer's keys; and computing them leaves training exactly as it was."""

import asyncio
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from arew.envs.registry import make_env
from arew.lab import export
from arew.lab import train as lab_train
from arew.lab.config import QUICK, LabConfig, parse_variant
from arew.lab.runner import run_key
from arew.lab.train import LOG_COLUMNS, train_run

CONFIG = replace(LabConfig(), **{**QUICK, "steps": 4, "episodes_per_step": 16, "test_tasks": 8})
VARIANT = "ppo-as+bt"
REPLAY_COLUMNS = ("i_as_nats", "oracle_reward", "corr_as_reward", "corr_as_oracle", "corr_gap", "oracle_reward_gap")
SELFLOCK_KEYS = ("selflock/corr_as_reward", "selflock/corr_as_oracle", "selflock/corr_gap", "selflock/oracle_reward_gap")


def replayed_proxies(rows: list[dict], texts: list[list[str]]) -> list[dict]:
    """``env.proxies()`` of fresh environments fed each episode's texts: the rollout's own proxies not consulted."""
    out = []
    for row, sent in zip(rows, texts):
        env = make_env(CONFIG.task, row, int(row["seed"]), replay_samples=CONFIG.replay_samples)
        for t in range(0, len(sent) - 1, 2):
            asyncio.run(env.act(sent[t]))
            env.update(sent[t + 1])
        env.answer(sent[-1])
        out.append(env.proxies())
    return out


def correlation(x: np.ndarray, y: np.ndarray) -> float:
    return math.nan if np.std(x) == 0 or np.std(y) == 0 else float(np.corrcoef(x, y)[0, 1])


def recorded_run(monkeypatch, diagnose_training: bool):
    """A quick run with every training rollout kept beside the rows it played; ``diagnose_training=False``
    plays them undiagnosed and fills their proxies from :func:`replayed_proxies` instead."""
    steps, original = [], lab_train.rollout

    def recording(policy, critic, space, task, rows, *args, **kwargs):
        if len(steps) == CONFIG.steps:  # the held-out evaluation
            return original(policy, critic, space, task, rows, *args, **kwargs)
        ro = original(policy, critic, space, task, rows, *args, **{**kwargs, "diagnose": diagnose_training})
        if not diagnose_training:
            assert ro.proxies == []
            ro.proxies = replayed_proxies(rows, ro.texts)
        steps.append((rows, ro))
        return ro

    monkeypatch.setattr(lab_train, "rollout", recording)
    result = train_run(CONFIG, parse_variant(VARIANT), 0)
    monkeypatch.setattr(lab_train, "rollout", original)
    assert len(steps) == CONFIG.steps
    return result, steps


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        result, steps = recorded_run(monkeypatch, diagnose_training=True)
    folder = tmp_path_factory.mktemp("replay") / "run"
    export.write_run(folder, result.log, result.critique_stats, result.rollouts, VARIANT)
    return result, steps, folder


def test_each_step_logs_the_replay_of_its_whole_batch(recorded):
    result, steps, _ = recorded
    defined = {column: 0 for column in REPLAY_COLUMNS}
    for row, (rows, ro) in zip(result.log, steps):
        assert len(ro.proxies) == len(rows) == CONFIG.episodes_per_step
        proxies = replayed_proxies(rows, ro.texts)
        i_as = np.array([p["i_as_nats"] for p in proxies])
        oracle = np.array([p["oracle_reward"] for p in proxies])
        as_share = np.array([np.mean(p["as"]) for p in proxies])  # the env's own AS proxies, not the lab's tensor
        reward = np.array([p["reward"] for p in proxies])
        np.testing.assert_array_equal(reward, ro.reward.double().numpy())
        own, with_oracle = correlation(as_share, reward), correlation(as_share, oracle)
        expected = {
            "i_as_nats": i_as.mean(),
            "oracle_reward": oracle.mean(),
            "corr_as_reward": own,
            "corr_as_oracle": with_oracle,
            "corr_gap": with_oracle - own,
            "oracle_reward_gap": oracle.mean() - reward.mean(),
        }
        for column, value in expected.items():
            logged = row[column]
            if math.isnan(value):
                assert math.isnan(logged), (row["step"], column, logged)
            else:
                # the correlations read the lab's float32 AS proxies: equal to the env's to 1e-8
                tolerance = 1e-6 if column.startswith("corr") else 1e-12
                assert logged == pytest.approx(value, abs=tolerance), (row["step"], column)
                defined[column] += 1
    # the quick run's early steps get reward 0 everywhere (no correlation), not all of them
    assert all(defined.values()), defined
    assert max(row["i_as_nats"] for row in result.log) > 0


def test_the_export_carries_the_replay_keys_the_episode_numbers_and_the_group(recorded):
    result, steps, folder = recorded
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, CONFIG.steps + 1))
    for line, row in zip(lines, result.log):
        data = line["data"]
        assert data["episode/proxy_i_as_nats/mean"] == row["i_as_nats"]
        assert data["episode/proxy_oracle_reward/mean"] == row["oracle_reward"]
        assert data["selflock/oracle_reward_gap"] == row["oracle_reward_gap"]
        for key, column in zip(SELFLOCK_KEYS, ("corr_as_reward", "corr_as_oracle", "corr_gap")):
            assert data[key] == row[column] if not math.isnan(row[column]) else key not in data  # NaN: left out
        assert not [key for key in data if key.startswith("lab/") and key[4:] in REPLAY_COLUMNS]
    assert any(all(key in line["data"] for key in SELFLOCK_KEYS) for line in lines)
    assert json.loads((folder / "rollouts" / "run.json").read_text()) == {"group": VARIANT}
    episodes = [json.loads(line) for line in (folder / "rollouts" / "train.jsonl").read_text().splitlines()]
    indices = export.sampled_indices(CONFIG.episodes_per_step)
    assert len(episodes) == len(indices) * CONFIG.steps
    for step, (_, ro) in enumerate(steps, 1):
        for episode, b in zip([e for e in episodes if e["step"] == step], indices):
            assert episode["numbers"]["proxy_i_as_nats"] == ro.proxies[b]["i_as_nats"]
            assert episode["numbers"]["proxy_oracle_reward"] == ro.proxies[b]["oracle_reward"]


def test_diagnosing_the_training_rollouts_changes_no_training_number(recorded, monkeypatch):
    """env.proxies() draws from its own generator: the same run with undiagnosed training rollouts (their
    proxies replayed afterwards) logs the same numbers and evaluates the same."""
    result, _, _ = recorded
    plain, _ = recorded_run(monkeypatch, diagnose_training=False)

    def strip(log):
        return json.dumps([{k: v for k, v in row.items() if k != "seconds"} for row in log])  # NaN equals NaN here

    assert strip(plain.log) == strip(result.log)
    assert plain.final == result.final


def test_the_run_key_changes_with_the_log_columns(monkeypatch):
    variant = parse_variant(VARIANT)
    key = run_key(CONFIG, variant, 0)
    assert repr(LOG_COLUMNS) in key
    monkeypatch.setattr(lab_train, "LOG_COLUMNS", tuple(c for c in LOG_COLUMNS if c not in REPLAY_COLUMNS))
    assert run_key(CONFIG, variant, 0) != key
