"""``arew eval`` from its command line against a loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest
from aiohttp import web

from arew.cli import main

QUESTION = "<interact>1, 2 | 1, 2</interact>"
BELIEF = "<interact>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</interact>"
ANSWER = "<answer>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</answer>"


@contextlib.contextmanager
def served(handler):
    """``handler`` as a chat-completions endpoint on its own event loop in a thread (``arew eval`` runs its own loop); its URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state = {}

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        state["runner"] = runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["url"] = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        yield state["url"]
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


@pytest.fixture(scope="module")
def endpoint():
    """Asks one question, states a belief, answers."""
    requests: list[dict] = []

    async def completions(request: web.Request) -> web.Response:
        payload = await request.json()
        requests.append(payload)
        turn = sum(m["role"] == "assistant" for m in payload["messages"])
        text = [QUESTION, BELIEF, ANSWER][min(turn, 2)]
        return web.json_response({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 100, "completion_tokens": 12}})  # fmt: skip

    with served(completions) as url:
        yield url, requests


def test_eval_writes_episodes_tables_and_resumes(endpoint, tmp_path, capsys):
    url, requests = endpoint
    argv = ["eval", "pe-g-s2", "--endpoint", url, "--model", "served-model", "--api-key-env", "AREW_TEST_NO_KEY",
            "--data-dir", str(tmp_path / "data"), "--limit", "2", "--n", "2", "--temperature", "0.7",
            "--out", str(tmp_path / "out"), "--quiet"]  # fmt: skip
    main(argv)
    folder = tmp_path / "out" / "normal"
    lines = (folder / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["failed"] is None for line in lines)
    assert (tmp_path / "data" / "pe-g-s2" / "test.parquet").exists()  # a synthetic task is prepared on the fly
    table = (folder / "results.md").read_text()
    assert "| pass@2 |" in table and "| mean@2 |" in table and "| decisions | 3 |" in table
    summary = json.loads((folder / "results.json").read_text())
    assert summary["episodes"] == 4 and summary["prompts"] == 2 and summary["config"]["model"] == "served-model"
    assert summary["endpoint"]["completions"] == summary["endpoint"]["requests"] == 12 and summary["endpoint"]["retries"] == 0
    assert "endpoint: requests 12" in table
    assert {r["model"] for r in requests} == {"served-model"} and all(r["temperature"] == 0.7 for r in requests)
    assert "results.md" in capsys.readouterr().out
    seen = len(requests)
    main(argv)  # resumes: nothing left to play
    assert len(requests) == seen

    main(argv + ["--feedback-ablation"])
    drop = (tmp_path / "out" / "ablation_drop.md").read_text()
    assert "| reward |" in drop and (tmp_path / "out" / "ablation" / "results.csv").exists()
    # the drop as the dashboard's key, in verl's file-logger format, where `arew report <out>` reads it
    (line,) = (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    data = json.loads(line)["data"]
    assert data["eval/feedback_ablation_drop"] == pytest.approx(data["eval/reward"] - data["eval/reward_ablated"])
    normal = json.loads((tmp_path / "out" / "normal" / "results.json").read_text())["rows"]["reward"]["mean"]
    assert data["eval/reward"] == pytest.approx(normal)


def labelled_turns(folder):
    return [turn for line in (folder / "episodes.jsonl").read_text().splitlines() for turn in json.loads(line)["turns"]]


@pytest.mark.parametrize(("accuracy", "agreement"), [(1.0, 1.0), (0.0, 0.0)])
def test_a_critique_source_labels_beside_the_rules_and_the_table_gives_their_agreement(endpoint, tmp_path, accuracy, agreement):
    url, _ = endpoint
    main(["eval", "pe-g-s2", "--endpoint", url, "--model", "m", "--data-dir", str(tmp_path / "data"), "--limit", "2", "--quiet",
          "--out", str(tmp_path / "out"), "--critique-source", "simulated", "--critique-option", f"accuracy={accuracy}"])  # fmt: skip
    folder = tmp_path / "out" / "normal"
    turns = labelled_turns(folder)
    assert turns and all(set(turn["sources"]) == {"rules", "simulated"} for turn in turns)
    rows = json.loads((folder / "results.json").read_text())["rows"]
    for channel in ("as", "bt"):
        n = sum(turn["channel"] == channel for turn in turns)
        assert rows[f"source_agreement_{channel}"]["mean"] == agreement and rows[f"source_agreement_{channel}"]["n"] == n
        agree = sum(turn["sources"]["rules"] == turn["sources"]["simulated"] for turn in turns if turn["channel"] == channel)
        assert agree / n == agreement
    assert "| source_agreement_as |" in (folder / "results.md").read_text()


def test_the_judge_critiques_an_evaluation_through_its_server(endpoint, tmp_path):
    """The judge behind a second loopback server that calls every decision +1: agreement is the rules' share of +1."""
    url, _ = endpoint
    judged: list[dict] = []

    async def judge(request: web.Request) -> web.Response:
        judged.append(await request.json())
        return web.json_response({"choices": [{"message": {"content": "CRITIQUE: +1\nREASON: fine"}, "finish_reason": "stop"}]})

    with served(judge) as judge_url:
        main(["eval", "pe-g-s2", "--endpoint", url, "--model", "m", "--data-dir", str(tmp_path / "data"), "--limit", "1", "--quiet",
              "--out", str(tmp_path / "out"), "--critique-source", "judge", "--critique-option", f"url={judge_url}",
              "--critique-option", "model=judge-model"])  # fmt: skip
    turns = labelled_turns(tmp_path / "out" / "normal")
    assert len(judged) == len(turns) == 3 and {body["model"] for body in judged} == {"judge-model"}
    assert [turn["sources"]["judge"] for turn in turns] == [1, 1, 1] and all(turn["reason"] == "fine" for turn in turns)
    rows = json.loads((tmp_path / "out" / "normal" / "results.json").read_text())["rows"]
    rules_as = [turn["sources"]["rules"] for turn in turns if turn["channel"] == "as"]
    assert rows["source_agreement_as"]["mean"] == sum(label == 1 for label in rules_as) / len(rules_as)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--critique-source", "oracle"], "--critique-source: unknown critique source 'oracle'"),
        (["--critique-option", "accuracy=1"], "--critique-option needs --critique-source"),
        (["--critique-source", "simulated", "--critique-option", "acuracy=1"], "--critique-option acuracy: unknown key; valid keys are"),
        (["--critique-source", "simulated", "--critique-option", "accuracy"], "--critique-option: expected KEY=VALUE"),
        (["--env-option", "reward_rul=reference"], "--env-option.reward_rul: not an option"),
        (["--env-option", "nokey"], "--env-option: expected KEY=VALUE"),
        (["--n", "0"], "n: invalid value 0"),
        (["--limit", "-1"], "--limit: the number of prompts to play, at least 1, got -1"),
    ],
)
def test_bad_input_exits_naming_the_option(tmp_path, extra, message):
    with pytest.raises(SystemExit, match=message):
        main(["eval", "pe-g-s2", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--data-dir", str(tmp_path), *extra])


def test_a_task_built_from_public_data_says_how_to_prepare_it(tmp_path):
    with pytest.raises(SystemExit, match="arew prepare mediq --out .* --source"):
        main(["eval", "mediq", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--data-dir", str(tmp_path)])


def test_the_default_model_gets_laptop_sizes_and_others_the_training_budget():
    import argparse

    from arew.eval.cli import DEFAULT_MODEL_SIZES, TRAINING_SIZES, add_arguments, fill_sizes

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    for argv, expected in ((["pe-g-s2"], DEFAULT_MODEL_SIZES), (["pe-g-s2", "--model", "m"], TRAINING_SIZES),
                           (["pe-g-s2", "--endpoint", "http://x/v1", "--model", "m"], TRAINING_SIZES)):  # fmt: skip
        args = parser.parse_args(argv)
        fill_sizes(args)
        assert {key: getattr(args, key) for key in expected} == expected
    args = parser.parse_args(["pe-g-s2", "--limit", "9"])
    fill_sizes(args)
    assert args.limit == 9 and args.max_tokens_per_turn == DEFAULT_MODEL_SIZES["max_tokens_per_turn"]


def test_data_without_rows_or_without_extra_info_exits_naming_the_file(tmp_path):
    import pandas as pd

    empty, bare = tmp_path / "empty.parquet", tmp_path / "bare.parquet"
    pd.DataFrame({"prompt": []}).to_parquet(empty)
    pd.DataFrame({"prompt": ["hi"]}).to_parquet(bare)
    for path, message in ((empty, "empty.parquet has no rows"), (bare, "bare.parquet row 0 has no extra_info record")):
        with pytest.raises(SystemExit, match=message):
            main(["eval", "pe-g-s2", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--data", str(path)])


@pytest.mark.parametrize(("flag", "value"), [("--n-train", "-5"), ("--n-train", "0"), ("--n-val", "-1"), ("--n-test", "-2")])
def test_prepare_refuses_a_size_that_writes_no_split(tmp_path, flag, value):
    with pytest.raises(SystemExit, match=f"{flag}: rows of that split, at least"):
        main(["prepare", "pe-g-s2", "--out", str(tmp_path / "data"), flag, value])
    assert not (tmp_path / "data").exists()
