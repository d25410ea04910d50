"""Rollout rows: which episodes are sampled, what a row holds, and how the W&B table lays it out."""

from __future__ import annotations

import json
import logging
import random

import pytest
import torch

from arew.metrics.rollouts import (
    RolloutSettings,
    ValidationSample,
    append_jsonl,
    build_row,
    critique_line,
    decisions_of,
    drop_rows_from,
    last_user_message,
    sample_indices,
    table,
    transcript,
    transcript_text,
    truncate,
)

NAMES = [f"train:{row}:{session}" for row in range(16) for session in range(4)]


def test_sampling_depends_on_names_and_step_not_on_arrival_order():
    chosen = [NAMES[i] for i in sample_indices(NAMES, 3, 5)]
    assert len(set(chosen)) == 5
    for seed in range(5):
        shuffled = random.Random(seed).sample(NAMES, len(NAMES))
        assert [shuffled[i] for i in sample_indices(shuffled, 3, 5)] == chosen
    assert any([NAMES[i] for i in sample_indices(NAMES, step, 5)] != chosen for step in (4, 5, 6))
    assert sample_indices(NAMES, 3, 0) == [] and sorted(sample_indices(NAMES[:3], 3, 10)) == [0, 1, 2]


def test_padding_samples_are_never_picked():
    names = [None, *NAMES[:3], None]
    assert sorted(sample_indices(names, 1, 5)) == [1, 2, 3]


def test_validation_sample_offered_batch_by_batch_picks_what_the_whole_list_would():
    expected = [NAMES[i] for i in sample_indices(NAMES, 0, 4)]
    for seed in range(3):
        sample = ValidationSample(step=0, count=4)
        for name in random.Random(seed).sample(NAMES, len(NAMES)):
            sample.offer(name, {"name": name})
        sample.offer(None, {"name": "padding"})
        assert [p["name"] for p in sample.payloads()] == expected


def test_decision_ranges_per_row_follow_the_sorted_sample_index():
    sample = torch.tensor([0, 0, 1, 1, 1, 3])
    assert decisions_of(sample, [3, 1, 2, 0]) == [(5, 6), (2, 5), (5, 5), (0, 2)]


def _stored(n_pairs=2, limit=4000):
    turns = []
    for k in range(n_pairs):
        turns += [
            {"agent": f"ask {k}", "channel": "as", "critique": 1 if k == 0 else -1, "feedback": f"answer {k}"},
            {"agent": f"belief {k}", "channel": "bt", "critique": 0, "feedback": "ok"},
        ]
    turns.append({"agent": "<answer>1</answer>", "channel": "bt", "critique": 1, "feedback": None})
    return transcript(turns, "Find the weights.", "pe-g-s2", "arew/pe-g-s2", limit)


def test_a_row_holds_each_decisions_critique_applied_sign_and_coefficient():
    stored = _stored()
    applied, coefficients = [1, 0, -1, 0, 0], [0.5, 0.0, -0.25, 0.0, 0.0]
    numbers = {"decisions": 5.0, "proxy_as_mean": 0.3, "flag": True}
    row = build_row("train", 7, "train:3:1", 1.0, stored, numbers, None, applied, coefficients)
    assert set(row) == {"split", "step", "episode", "task", "data_source", "reward", "failed", "prompt", "numbers", "turns"}
    assert (row["split"], row["step"], row["episode"], row["task"], row["data_source"]) == ("train", 7, "train:3:1", "pe-g-s2", "arew/pe-g-s2")
    assert row["numbers"] == {"decisions": 5.0, "proxy_as_mean": 0.3} and row["failed"] is None
    assert [t["index"] for t in row["turns"]] == [0, 1, 2, 3, 4]
    assert [t["turn"] for t in row["turns"]] == [1, 1, 2, 2, 2]  # the answer belongs to the last turn
    assert [t["critique"] for t in row["turns"]] == [1, 0, -1, 0, 1]
    assert [t["applied"] for t in row["turns"]] == applied and [t["coefficient"] for t in row["turns"]] == coefficients
    assert row["turns"][1]["agent"] == "belief 0" and row["turns"][-1]["feedback"] is None
    json.dumps(row, allow_nan=False)


def test_rows_without_an_advantage_stage_or_with_mismatched_decisions_have_null_values(caplog):
    stored = _stored()
    val = build_row("val", 0, "val:0:0", 0.0, stored, {}, None)
    assert all(t["applied"] is None and t["coefficient"] is None for t in val["turns"]) and len(val["turns"]) == 5
    with caplog.at_level(logging.WARNING):
        row = build_row("train", 1, "train:0:0", 0.0, stored, {}, None, [1, 0], [0.5, 0.0])
    assert all(t["applied"] is None for t in row["turns"]) and "train:0:0: 5 turns but 2 decisions" in caplog.text
    failed = build_row("train", 1, "train:0:1", 0.0, {"turns": stored["turns"][:1]}, {}, {"reason": "generation", "error": "RuntimeError: x"})
    assert failed["failed"] == {"reason": "generation", "error": "RuntimeError: x"} and len(failed["turns"]) == 1
    with pytest.raises(ValueError, match="split"):
        build_row("test", 1, "x", 0.0, stored, {}, None)


def test_long_texts_are_cut_at_the_limit_and_say_so():
    assert truncate("short", 10) == "short" and truncate(None, 10) is None
    cut = truncate("x" * 500, 100)
    assert len(cut) == 100 and cut.endswith("[500 characters, cut]")
    assert truncate("abcdef", 3) == "abc"
    stored = transcript([{"agent": "a" * 300, "channel": "as", "critique": 1, "feedback": "b" * 300}], "p" * 300, "t", None, 120)
    assert len(stored["prompt"]) == len(stored["turns"][0]["agent"]) == len(stored["turns"][0]["feedback"]) == 120


def test_last_user_message_of_a_prompt():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "u2"}]
    assert last_user_message(messages) == "u2" and last_user_message([{"role": "system", "content": "s"}]) == "" and last_user_message(None) == ""


def test_the_table_shows_signs_per_turn_and_numbers_as_columns():
    row = build_row("train", 2, "train:1:0", 1.0, _stored(1), {"proxy_as_mean": 0.5, "failed": 0.0}, None, [1, 0, -1], [0.4, 0.0, -0.4])
    val = build_row("val", 2, "val:1:0", 0.0, _stored(1), {"proxy_oracle_reward": 1.0}, {"reason": "deadline", "error": "late"})
    columns, data = table([row, val])
    assert columns[-3:] == ["failed", "proxy_as_mean", "proxy_oracle_reward"] and len(set(columns)) == len(columns)
    assert [dict(zip(columns, d))["failure"] for d in data] == ["", "deadline"]
    record = dict(zip(columns, data[0]))
    assert record["critiques"] == "AS+1 BT0 BT+1>-1" == critique_line(row)
    assert record["coef_pos"] == 0.4 and record["coef_neg"] == -0.4 and record["proxy_oracle_reward"] is None
    text = transcript_text(row)
    assert text.splitlines()[0] == "[0] turn 1 AS critique +1 applied +1 coef +0.4"
    assert "agent: ask 0\nenv: answer 0" in text and "[2] turn 1 BT critique +1 applied -1 coef -0.4" in text
    assert dict(zip(columns, data[1]))["coef_pos"] is None and "applied" not in transcript_text(val)


def test_jsonl_rows_append_and_non_finite_numbers_become_null(tmp_path):
    row = build_row("val", 0, "val:0:0", float("nan"), _stored(1), {"proxy_as_mean": float("inf")}, None)
    path = tmp_path / "rollouts" / "val.jsonl"
    append_jsonl(path, [row])
    append_jsonl(path, [row, row])
    append_jsonl(path, [])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 3 and lines[0]["reward"] is None and lines[0]["numbers"]["proxy_as_mean"] is None


@pytest.mark.parametrize(
    "raw, key",
    [({"per_step": -1}, "arew_rollouts.per_step"), ({"val_per_step": 1.5}, "arew_rollouts.val_per_step"),
     ({"max_text_chars": 0}, "arew_rollouts.max_text_chars"), ({"dir": ""}, "arew_rollouts.dir"),
     ({"wandb": "yes"}, "arew_rollouts.wandb"), ({"per_stepp": 2}, "arew_rollouts.per_stepp"),
     ({"per_step": True}, "arew_rollouts.per_step")],
)  # fmt: skip
def test_settings_errors_name_the_key(raw, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        RolloutSettings.from_config(raw)


def test_the_folder_defaults_beside_verls_file_logger(tmp_path, monkeypatch):
    assert RolloutSettings.from_config({"dir": str(tmp_path / "mine")}).folder("ckpt") == tmp_path / "mine"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "run" / "metrics.jsonl"))
    assert RolloutSettings.from_config(None).folder("ckpt") == (tmp_path / "run" / "rollouts").resolve()
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH")
    assert str(RolloutSettings.from_config({}).folder("ckpt/run")) == "ckpt/run/rollouts"
    assert not RolloutSettings.from_config({"per_step": 0, "val_per_step": 0}).enabled and RolloutSettings().enabled


def test_a_row_holding_a_lone_surrogate_is_written_as_utf8_and_reads_back_the_same(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = [{"episode": "train:0:0", "transcript": "CRITIQUE: +1 \ud800"}, {"episode": "train:1:0", "transcript": "héllo"}]
    append_jsonl(path, rows)
    lines = path.read_bytes().decode("utf-8").splitlines()  # strict UTF-8: the file is valid text
    assert [json.loads(line) for line in lines] == rows
    assert "héllo" in lines[1]  # rows without such a code point stay readable UTF-8


def test_a_resumed_run_drops_the_interrupted_run_s_rows_of_its_step_and_later_and_a_torn_line(tmp_path):
    path = tmp_path / "train.jsonl"
    append_jsonl(path, [{"step": 1, "episode": "a"}, {"step": 2, "episode": "b"}, {"step": 3, "episode": "c"}])
    with open(path, "a") as handle:
        handle.write('{"step": 3, "epis')  # killed mid-line
    assert drop_rows_from(path, 2) == 3
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"step": 1, "episode": "a"}]
    assert drop_rows_from(path, 2) == 0 and drop_rows_from(tmp_path / "absent.jsonl", 1) == 0


def test_a_row_holding_a_line_separator_stays_one_line_for_any_reader(tmp_path):
    # a model may write U+0085, U+2028 or U+2029; JSON keeps them raw, str.splitlines() ends a line at each
    path = tmp_path / "train.jsonl"
    rows = [{"step": 1, "transcript": "a\x85b\u2028c\u2029d"}, {"step": 2, "transcript": "e"}]
    append_jsonl(path, rows)
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == rows
    assert drop_rows_from(path, 2) == 1 and [json.loads(line) for line in path.read_text().splitlines()] == rows[:1]
