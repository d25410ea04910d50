"""``arew eval`` from its command line against a loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import web

from arew.cli import main

QUESTION = "<interact>1, 2 | 1, 2</interact>"
BELIEF = "<interact>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</interact>"
ANSWER = "<answer>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</answer>"


@pytest.fixture(scope="module")
def endpoint():
    """Asks one question, states a belief, answers; the server runs on its own loop in a thread."""
    requests: list[dict] = []

    async def completions(request: web.Request) -> web.Response:
        payload = await request.json()
        requests.append(payload)
        turn = sum(m["role"] == "assistant" for m in payload["messages"])
        text = [QUESTION, BELIEF, ANSWER][min(turn, 2)]
        return web.json_response({"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 100, "completion_tokens": 12}})  # fmt: skip

    loop = asyncio.new_event_loop()
    started = threading.Event()
    state = {}

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        state["runner"] = runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["url"] = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert started.wait(30)
    yield state["url"], requests
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


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


@pytest.mark.parametrize(
    ("extra", "message"),
    [
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
