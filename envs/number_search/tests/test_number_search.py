"""The task package in envs/number_search, installed as a user installs one (pip, the ``arew.tasks`` entry point,
its Hydra configs found through it); then prepared and evaluated through AReW's own commands."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.envs import registry
from arew.envs.rows import read_rows

UNIFORM = ", ".join(["0.125"] * 8)


@pytest.fixture(scope="module")
def plugin():
    """The package as ``pip install -e envs/number_search`` leaves it: found through its ``arew.tasks`` entry point
    alone; the commands' environment."""
    assert "arew-number-search" in {d.metadata["Name"] for d in importlib.metadata.distributions()}
    return dict(os.environ)


def episode(secret: int):
    return registry.make_env("number-search", {"task": "number-search", "secret": secret, "n_candidates": 8, "max_turns": 4}, 0)


def ask(env, text: str):
    return asyncio.run(env.act(f"<scratch>.</scratch><interact>{text}</interact>"))


def scores(*possible: int, low: float = 0.0) -> str:
    return ", ".join("1" if k in possible else str(low) for k in range(1, 9))


def test_the_installed_package_registers_its_task(plugin):
    assert "number-search" in registry.task_names()
    assert registry.env_class("number-search").__module__ == "arew_number_search.env"
    assert "number-search: find a secret number" in registry.describe()


def test_binary_search_earns_every_critique_and_the_reward(plugin):
    env = episode(secret=6)
    step = ask(env, "Is it at most 4?")
    assert (step.critique, step.feedback.split("\n")[0]) == (1, "User: No.")
    assert env.update(f"<interact>{scores(5, 6, 7, 8)}</interact>").critique == 1
    assert ask(env, "Is it at most 6?").critique == 1
    assert env.update(f"<interact>{scores(5, 6)}</interact>").critique == 1
    assert ask(env, "at most 5").critique == 1
    final = env.answer(f"<answer>{scores(6)}</answer>")
    assert final.critique == 1 and final.done and env.reward() == 1.0
    assert env.proxies()["n_possible"] == 1.0 and env.proxies()["as"] == [1, 1, 1]


def test_questions_that_cannot_change_anything_and_beliefs_that_ignore_answers_are_critiqued(plugin):
    env = episode(secret=2)
    assert ask(env, "Is it at most 4?").critique == 1  # Yes: 1-4 remain
    assert env.update(f"<interact>{scores(1, 2, 3, 4, 5)}</interact>").critique == -1  # 5 was ruled out
    assert ask(env, "Is it at most 6?").critique == -1  # every remaining number is <= 6: no news
    assert env.update(f"<interact>{scores(1, 2, 3, 4)}</interact>").critique == -1  # no news, yet the scores moved
    assert ask(env, "Is it at most 7?").critique == -1
    assert env.update(f"<interact>{scores(1, 2, 3, 4)}</interact>").critique == 1  # unchanged after no news
    assert env.proxies()["as"] == [1, 0, 0]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Is it at most 2 or 3?", "exactly one whole number, found 2"),
        ("Is it at most 8?", "between 1 and 7, got 8"),
        ("Is it at most 0?", "between 1 and 7, got 0"),
        ("Is it at most 2.5?", "exactly one whole number, found 0"),
        ("Is it small?", "exactly one whole number, found 0"),
    ],
)
def test_invalid_questions_cost_the_round_and_say_why(plugin, text, error):
    env = episode(secret=3)
    step = ask(env, text)
    assert (step.critique, step.valid) == (-1, False) and error in step.feedback
    assert env.update(f"<interact>{UNIFORM}</interact>").critique == 1  # nothing was learned: unchanged is right


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200), st.text(max_size=200), st.integers(1, 8))
def test_garbage_never_crashes_and_never_earns_a_positive_question_critique_without_news(plugin, question, belief, secret):
    env = episode(secret)
    step = asyncio.run(env.act(question))
    assert step.critique in (-1, 1) and (step.critique == 1) == bool(step.info.get("as_proxy"))
    update = env.update(belief)
    assert update.critique in (-1, 1)
    assert env.answer(belief).done and env.reward() in (0.0, 1.0)


def test_arew_prepare_and_eval_run_the_plugin_task(plugin, tmp_path):
    data = tmp_path / "data" / "number-search"
    subprocess.run(["arew", "prepare", "number-search", "--out", str(data), "--n-train", "8", "--n-val", "2", "--n-test", "3"],
                   env=plugin, check=True, capture_output=True)  # fmt: skip
    rows = read_rows(data / "test.parquet")
    assert len(rows) == 3 and {row["data_source"] for row in rows} == {"arew/number-search"}
    assert {row["agent_name"] for row in rows} == {"arew_agent"} and all(1 <= row["extra_info"]["secret"] <= 8 for row in rows)

    from arew.verl_plugin.smoke import tiny_model

    model = tiny_model(tmp_path / "model")
    out = tmp_path / "eval"
    done = subprocess.run(
        ["arew", "eval", "number-search", "--model", str(model), "--device", "cpu", "--data-dir", str(tmp_path / "data"),
         "--limit", "2", "--max-tokens-per-turn", "8", "--feedback-reserve-tokens", "128", "--response-length", "512", "--out", str(out), "--quiet"],
        env=plugin, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    episodes = [json.loads(line) for line in (out / "normal" / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 2 and all(e["failed"] is None for e in episodes)
