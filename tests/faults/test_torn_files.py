"""The fault probe's torn files as a suite: every file a killed or crashed process can leave half-written, and that a
later command reads back, torn in every way a write can be cut (empty, one byte, half, all but the last byte, a
garbage tail), through the code that reads it. Each reader keeps what is whole and drops or rebuilds what is not,
or refuses with a message naming the file; none raises anything else. About 2 s."""

from __future__ import annotations

import json

import pytest

from arew.envs.registry import PREPARED, prepare_task
from arew.eval.local import resolve_model_folder
from arew.eval.runner import EPISODES_FILE, read_episodes
from arew.lab.runner import RunCache
from arew.metrics.rollouts import drop_rows_from
from arew.reporting.report import load_runs
from arew.verl_plugin.smoke import read_metrics


def tears(whole: bytes) -> dict[str, bytes]:
    """``whole`` cut as an interrupted write leaves it, and with bytes no writer of the project writes."""
    return {"empty": b"", "one byte": whole[:1], "half": whole[: len(whole) // 2], "all but the last byte": whole[:-1],
            "garbage tail": whole + b"\xff\xfe\x00{\"step\": "}  # fmt: skip


def torn_last_line(lines: list[str]) -> dict[str, bytes]:
    """A JSON-lines file whose earlier lines are whole and whose last line is torn."""
    head = "".join(line + "\n" for line in lines[:-1]).encode()
    return {name: head + tail for name, tail in tears(lines[-1].encode()).items() if tail}


METRIC_LINES = [json.dumps({"step": step, "data": {"training/global_step": step, "critic/score/mean": 0.1 * step}}) for step in (1, 2, 3)]
ROW_LINES = [json.dumps({"step": step, "episode": f"e{step}", "reward": 1.0, "turns": []}) for step in (1, 2, 3)]


@pytest.mark.parametrize("tear", list(torn_last_line(METRIC_LINES)))
def test_training_metrics_keep_their_whole_steps(tmp_path, tear):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(torn_last_line(METRIC_LINES)[tear])
    steps, _ = read_metrics(path)
    assert [entry["step"] for entry in steps] == [1, 2]
    runs = load_runs([tmp_path])
    assert [step for step, _ in runs[0].series["critic/score/mean"]] == [1, 2] and runs[0].problems


@pytest.mark.parametrize("tear", list(torn_last_line(ROW_LINES)))
def test_rollout_rows_of_a_resumed_run_lose_only_the_torn_line(tmp_path, tear):
    path = tmp_path / "train.jsonl"
    path.write_bytes(torn_last_line(ROW_LINES)[tear])
    drop_rows_from(path, step=3)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize("tear", list(tears(b'{"name": "e0", "reward": 1.0}')))
def test_eval_episodes_read_back_whole_ones_only(tmp_path, tear):
    whole = json.dumps({"name": "e1", "reward": 0.5})
    (tmp_path / EPISODES_FILE).write_bytes(f"{whole}\n".encode() + tears(b'{"name": "e0", "reward": 1.0}')[tear])
    assert list(read_episodes(tmp_path)) == ["e1"]


@pytest.mark.parametrize("tear", list(tears(b'{"n_test": 2, "n_train": 4, "n_val": 2, "seed": 0, "source": null, "task": "pe-g-s2"}')))
def test_a_torn_preparation_record_prepares_the_data_again(tmp_path, tear):
    prepare_task("pe-g-s2", tmp_path, 4, 2, 2, seed=0)
    whole = (tmp_path / PREPARED).read_bytes()
    (tmp_path / PREPARED).write_bytes(tears(whole.rstrip(b"\n"))[tear])  # every tear of its JSON text
    (tmp_path / "train.parquet").write_bytes(b"PAR1 torn")  # what the interrupted preparation left beside it
    prepare_task("pe-g-s2", tmp_path, 4, 2, 2, seed=0, reuse=True)
    assert (tmp_path / PREPARED).read_bytes() == whole
    assert (tmp_path / "train.parquet").stat().st_size > 100


def test_a_torn_split_given_to_eval_is_refused_naming_it(tmp_path):
    from arew.eval.cli import load_rows

    prepare_task("pe-g-s2", tmp_path, 4, 2, 2, seed=0)
    for tear, data in tears((tmp_path / "test.parquet").read_bytes()).items():
        (tmp_path / "torn.parquet").write_bytes(data)
        args = type("Args", (), {"data": str(tmp_path / "torn.parquet"), "task": "pe-g-s2", "split": "test", "limit": None, "data_dir": None})
        with pytest.raises(ValueError, match="torn.parquet") as refused:
            load_rows(args)
        assert tear and "Traceback" not in str(refused.value)


@pytest.mark.parametrize("tear", ["empty", "half", "garbage tail"])
def test_a_torn_checkpoint_tracker_is_refused_naming_it(tmp_path, tear):
    (tmp_path / "global_step_12" / "actor").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_bytes(tears(b"12")[tear])
    with pytest.raises(FileNotFoundError, match="latest_checkpointed_iteration.txt"):
        resolve_model_folder(tmp_path)


@pytest.mark.parametrize("tear", list(tears(b'{"key": "k", "result": {}}')))
def test_a_torn_study_run_record_is_a_cache_miss(tmp_path, tear):
    cache = RunCache(tmp_path)
    cache._path("k").write_bytes(tears(b'{"key": "k", "result": {}}')[tear])
    assert cache.get("k") is None


@pytest.mark.parametrize("tear", ["empty", "half", "all but the last byte", "garbage tail"])
def test_a_torn_warm_start_calibration_is_measured_again(tmp_path, monkeypatch, tear):
    import arew.lab.lm.calibration
    from arew.lab.lm.experiment import LMLab, calibrate_warm_starts

    measured = []

    def calibrate(model, rows, out, **_):
        measured.append(model.name)
        return {"reward": {"mean": 0.5, "half_width": 0.0, "count": len(rows)}}

    monkeypatch.setattr(arew.lab.lm.calibration, "calibrate", calibrate)
    lab, models = LMLab(calibration_episodes=2), {"locked": tmp_path / "models" / "locked-aaaa"}
    calibrate_warm_starts(lab, tmp_path, models, log=lambda _: None)
    record = tmp_path / "calibration" / "locked" / "calibration.json"
    record.write_bytes(tears(record.read_bytes().rstrip(b"\n"))[tear])
    figures = calibrate_warm_starts(lab, tmp_path, models, log=lambda _: None)
    assert measured == ["locked-aaaa"] * 2 and figures["locked"]["figures"]["reward"]["mean"] == 0.5
    assert json.loads(record.read_text()) == figures["locked"]
