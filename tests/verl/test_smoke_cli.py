"""``arew smoke``'s command line: it fails loudly when verl's run does not complete."""

import json
import subprocess
import sys

import pytest

from arew.cli import main
from arew.verl_plugin.smoke import read_metrics


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("no_such_section.key=1", "Could not override 'no_such_section.key'"),
        ("algorithm.arew.lam=-1", "algorithm.arew.lam"),
    ],
)
def test_a_bad_config_is_refused_before_any_process_starts_naming_the_key(tmp_path, override, message):
    # composed and checked in the command's own process, as the trainer's start-up would, before Ray's half minute
    with pytest.raises(SystemExit) as stop:
        main(["smoke", "--out", str(tmp_path), "--quiet", override])
    assert str(stop.value).startswith("arew smoke: ") and message in str(stop.value)
    assert not (tmp_path / "main_ppo.log").exists()


def test_steps_must_be_positive(tmp_path):
    with pytest.raises(SystemExit, match="--steps"):
        main(["smoke", "--out", str(tmp_path), "--steps", "0"])


def test_the_command_line_imports_verl_for_the_smoke_command_only():
    # every `arew` command builds the whole parser; the plugin (and with it verl, seconds) is smoke's alone
    probe = "import sys; from arew.cli import build_parser; build_parser().parse_args(['lab', '--quick']); print('verl' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    with pytest.raises(SystemExit) as stop:
        main(["lab", "--no-such-option"])
    assert stop.value.code == 2


def test_metrics_file_splits_training_steps_from_validation(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 0, "data": {"val-core/arew/pe-g-s2/reward/mean@1": 0.5}}\n'
        '{"step": 1, "data": {"training/global_step": 1, "timing_s/step": 3.0}}\n'
        '{"step": 2, "data": {"training/global_step": 2, "timing_s/step": 2.0}}\n'
    )
    steps, validation = read_metrics(path)
    assert [s["step"] for s in steps] == [1, 2] and validation["val-core/arew/pe-g-s2/reward/mean@1"] == 0.5


def test_a_hung_run_is_killed_at_the_timeout(tmp_path, monkeypatch):
    from arew.verl_plugin import smoke

    monkeypatch.setattr(smoke, "command", lambda *args: ["sleep", "60"])
    result = smoke.run(out=tmp_path, timeout=1, model=tmp_path)
    assert result.returncode != 0 and result.wall_seconds < 30
    assert "killed after the 1 s timeout" in result.log_path.read_text()


def test_a_rerun_in_the_same_folder_keeps_the_earlier_run_s_steps(tmp_path):
    from arew.verl_plugin.smoke import SmokeRun, earlier_metrics, keep_earlier_metrics

    def steps(*numbers):
        return "".join(f'{{"step": {n}, "data": {{"training/global_step": {n}, "run": {len(earlier_metrics(tmp_path))}}}}}\n' for n in numbers)

    (tmp_path / "metrics.jsonl").write_text(steps(1, 2))  # killed after step 2, before its checkpoint
    keep_earlier_metrics(tmp_path)  # what arew smoke does before the resumed run, whose logger truncates the file
    (tmp_path / "metrics.jsonl").write_text(steps(2, 3, 4))  # the resume restarts at the saved step 2
    history = SmokeRun(tmp_path, 0).history()
    assert [(s["step"], s["run"]) for s in history] == [(1, 0), (2, 1), (3, 1), (4, 1)]
    assert keep_earlier_metrics(tmp_path).name == "metrics.attempt002.jsonl" and not (tmp_path / "metrics.jsonl").exists()


def test_the_summary_names_a_critique_source_that_labelled_few_decisions(tmp_path):
    from arew.verl_plugin.smoke import SmokeRun, summary

    entry = {"training/global_step": 1, "episode/critique_decisions/mean": 8.0, "episode/critique_missing/mean": 7.0}
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": entry}) + "\n")
    result = SmokeRun(tmp_path, 0)
    result.steps = result.history()
    text = summary(result)
    assert "no label for 88% of the decisions" in text and "MOST DECISIONS TRAINED WITHOUT THE SOURCE" in text
    entry["episode/critique_missing/mean"] = 0.0
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": entry}) + "\n")
    assert "no label for 0% of the decisions" in summary(result) and "MOST" not in summary(result)
