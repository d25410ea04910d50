"""tau2 telecom rows: split sizes, no test task in train, lossless parquet round trip, rebuilt episodes."""

from __future__ import annotations

import asyncio

import pytest

from arew.envs.registry import make_env
from arew.envs.rows import read_rows
from arew_tau2.env import Tau2Env
from arew_tau2.tasks import prepare, split_ids


def test_task_sets(telecom):
    _, named = telecom
    base = split_ids("base", named)
    assert [len(base[s]) for s in ("train", "validation", "test")] == [74, 40, 40]
    for task_set, n_train in (("small", 20), ("full", 2245)):
        ids = split_ids(task_set, named)
        assert len(ids["train"]) == n_train and ids["test"] == base["test"] == ids["validation"]
        assert not set(ids["train"]) & set(ids["test"])
    with pytest.raises(ValueError):
        split_ids("tiny", named)


def test_parquet_round_trip_rebuilds_identical_episodes(tmp_path, telecom, scripted):
    tasks, _ = telecom
    paths = prepare("tau2-solo", tmp_path / "solo")
    rows = {split: read_rows(path) for split, path in paths.items()}
    assert [len(rows[s]) for s in ("train", "validation", "test")] == [74, 40, 40]
    row = rows["train"][3]
    info = row["extra_info"]
    assert row["data_source"] == "arew/tau2-solo" and row["reward_model"]["ground_truth"] == info["task_id"]
    assert info["reward"] == "fractional" and rows["test"][0]["extra_info"]["reward"] == "official"
    assert tasks[info["task_id"]] == Tau2Env.from_row(info, info["seed"]).task  # the JSON round trip is lossless
    env = make_env("tau2-solo", info, info["seed"])
    assert env.initial_messages() == row["prompt"]
    again = make_env("tau2-solo", info, info["seed"])
    texts = ['<interact>{"name": "check_sim_status"}</interact>', '<interact>{"name": "reseat_sim_card"}</interact>', "oops"]
    assert [asyncio.run(env.act(t)).feedback for t in texts] == [asyncio.run(again.act(t)).feedback for t in texts]

    capped = prepare("tau2-dual", tmp_path / "dual", n_train=5, n_val=3, n_test=3, seed=1)
    dual = {split: read_rows(path) for split, path in capped.items()}
    assert [len(dual[s]) for s in ("train", "validation", "test")] == [5, 3, 3]
    assert [r["extra_info"]["task_id"] for r in dual["validation"]] == [r["extra_info"]["task_id"] for r in dual["test"]]
    info = dual["train"][0]["extra_info"]
    env = Tau2Env.from_row(info, info["seed"], customer=scripted())
    assert env.initial_messages() == dual["train"][0]["prompt"] and not env.solo


def test_a_large_train_size_cycles_the_tasks_into_distinct_episodes():
    """verl drops an incomplete batch: 256-row batches need more rows than tau2's 74 training tasks."""
    from arew_tau2.tasks import build_splits

    splits = build_splits("tau2-solo", n_train=200, n_val=100, seed=4)
    train = splits["train"]
    ids = [row["task_id"] for row in train]
    assert len(train) == 200 and len(splits["validation"]) == 40  # caps never repeat validation tasks
    assert sorted(ids[:74]) == sorted(set(ids)) and len(set(ids)) == 74  # whole passes first
    assert ids[:74] != ids[74:148]  # each pass in its own order
    assert len({row["seed"] for row in train}) == 200 and [row["index"] for row in train] == list(range(200))
    assert build_splits("tau2-solo", n_train=200, seed=4)["train"] == train
