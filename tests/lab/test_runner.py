"""``arew lab --quick`` end to end: every output file exists and is well formed."""

import csv
import json
import subprocess

import matplotlib.image as mpimg
import pytest

from arew.cli import build_parser
from arew.lab.config import DEFAULT_VARIANTS, QUICK
from arew.lab.report import RESULT_COLUMNS, TABLE_METRICS
from arew.lab.runner import build_config
from arew.lab.train import FINAL_COLUMNS, LOG_COLUMNS

pytestmark = pytest.mark.lab  # the module's lab run (about 20 s) and a second one on forked workers

VARIANTS = "ppo-vanilla,ppo-as+bt,grpo-vanilla,grpo-as"


def run_cli(*argv):
    args = build_parser().parse_args(["lab", *argv])
    args.func(args)
    return args


@pytest.fixture(scope="module")
def quick_console(tmp_path_factory):
    """``arew lab --quick`` as a user runs it, in a process of its own: (its output folder, its console)."""
    out = tmp_path_factory.mktemp("lab")
    done = subprocess.run(
        ["arew", "lab", "--quick", "--out", str(out), "--variants", VARIANTS, "--seeds", "2", "--workers", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, done.stdout + done.stderr


@pytest.fixture(scope="module")
def quick_run(quick_console):
    return quick_console[0]


def test_the_console_carries_only_the_project_s_lines(quick_console):
    # verl's import reports every engine and accelerator it lacks, in each process that imports it (the lab's
    # workers too); the lab imports verl's functions with those notices silenced (arew.verl_plugin.algorithms)
    _, console = quick_console
    assert "Warning" not in console and "WARNING" not in console and "verl" not in console, console[:3000]
    assert "arew lab: 8 runs of" in console and "| ppo-vanilla |" in console


def test_results_csv_has_one_complete_row_per_variant(quick_run):
    with open(quick_run / "results.csv") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == RESULT_COLUMNS
    assert [r["variant"] for r in rows] == VARIANTS.split(",")
    for row in rows:
        assert row["seeds"] == "2"
        for metric in TABLE_METRICS:
            float(row[f"{metric}_mean"]), float(row[f"{metric}_std"])
        assert 0.0 <= float(row["reward_mean"]) <= 1.0
        assert 0.0 <= float(row["as_proxy_mean"]) <= 1.0
        float(row["vanilla_final_train_reward"])
        assert 0 <= int(row["reached_vanilla_final"]) <= 2


def test_markdown_table_lists_every_variant_with_matching_columns(quick_run):
    lines = (quick_run / "results.md").read_text().strip().splitlines()
    assert lines[0].startswith("| variant | reward [95% CI] | reward − vanilla [95% CI] | AS proxy | BT proxy")
    assert set(lines[1]) <= {"|", "-"}
    width = lines[0].count("|")
    assert all(line.count("|") == width for line in lines)
    assert [line.split("|")[1].strip() for line in lines[2:]] == VARIANTS.split(",")
    assert all("±" in line for line in lines[2:])


def test_learning_curve_pngs_are_valid_images(quick_run):
    for base in ("ppo", "grpo"):
        path = quick_run / f"curves_{base}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 300


def test_raw_logs_and_config_parse(quick_run):
    meta = json.loads((quick_run / "config.json").read_text())
    assert meta["config"]["steps"] == QUICK["steps"] and meta["config"]["seeds"] == [0, 1]
    assert meta["config"]["variants"] == VARIANTS.split(",")
    assert meta["wall_seconds"] > 0 and {"torch", "verl", "python"} <= set(meta["versions"])
    for name in VARIANTS.split(","):
        for seed in (0, 1):
            with open(quick_run / "runs" / name / f"seed{seed}.csv") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
            assert tuple(reader.fieldnames) == LOG_COLUMNS
            assert [int(r["step"]) for r in rows] == list(range(1, QUICK["steps"] + 1))
            payload = json.loads((quick_run / "runs" / name / f"seed{seed}.json").read_text())
            assert payload["variant"] == name and payload["seed"] == seed
            assert list(payload["final"]) == list(FINAL_COLUMNS)
            assert len(payload["log"]) == QUICK["steps"]
            assert float(rows[-1]["reward"]) == pytest.approx(payload["log"][-1]["reward"])


def test_forked_workers_give_the_same_results_as_one_process(quick_run, tmp_path):
    run_cli("--quick", "--out", str(tmp_path), "--variants", VARIANTS, "--seeds", "2", "--workers", "2")
    for name in VARIANTS.split(","):
        for seed in (0, 1):
            ours = json.loads((tmp_path / "runs" / name / f"seed{seed}.json").read_text())
            theirs = json.loads((quick_run / "runs" / name / f"seed{seed}.json").read_text())
            assert ours["final"] == theirs["final"]
            drop = [{k: v for k, v in row.items() if k != "seconds"} for row in ours["log"]]
            keep = [{k: v for k, v in row.items() if k != "seconds"} for row in theirs["log"]]
            assert json.dumps(drop) == json.dumps(
                keep
            )  # (NaN, a step without an accuracy estimate, equals itself there)


def test_a_second_default_run_comes_from_the_cache(quick_run, monkeypatch):
    """The default run keeps its runs in <out>/cache as the studies do (and shares them with a study run there)."""
    before = (quick_run / "results.md").read_text()

    def no_training(*args, **kwargs):
        raise AssertionError("every run should come from the cache")

    monkeypatch.setattr("arew.lab.runner.run_all", no_training)
    run_cli("--quick", "--out", str(quick_run), "--variants", VARIANTS, "--seeds", "2", "--workers", "1")
    assert (quick_run / "results.md").read_text() == before


def test_command_line_builds_the_config():
    parser = build_parser()
    default = build_config(parser.parse_args(["lab"]))
    assert default.variants == DEFAULT_VARIANTS and default.seeds == tuple(range(10)) and default.task == "pe-g-s2"
    quick = build_config(
        parser.parse_args(
            [
                "lab",
                "--quick",
                "--steps",
                "4",
                "--task",
                "pe-f-d6",
                "--lam",
                "0.5",
                "--grouping",
                "separate",
                "--salience",
                "1",
            ]
        )
    )
    assert quick.steps == 4 and quick.task == "pe-f-d6" and quick.arew_lambda == 0.5
    assert quick.grouping == "separate" and quick.salience_init == 1.0
    assert quick.episodes_per_step == QUICK["episodes_per_step"] and quick.seeds == (0,)
    with pytest.raises(SystemExit, match="bad variant"):
        build_config(parser.parse_args(["lab", "--variants", "ppo-vanilla,sac-as"]))
    with pytest.raises(SystemExit):
        build_config(parser.parse_args(["lab", "--seeds", "0"]))


def test_every_run_is_written_in_the_trainers_formats_and_reported(quick_run):
    from arew.reporting.report import load_runs

    folders = [quick_run / "runs" / name / f"seed{seed}" for name in VARIANTS.split(",") for seed in (0, 1)]
    runs = load_runs(folders)
    assert all(run.problems == {} for run in runs)
    assert all(len(run.series["critic/score/mean"]) == QUICK["steps"] for run in runs)
    assert all(len(run.episodes) == 4 * QUICK["steps"] for run in runs)
    reweighted = [run for run in runs if "vanilla" not in run.name]
    assert reweighted and all("arew/both_signs_frac" in run.series for run in reweighted)
    html = (quick_run / "report.html").read_text()
    assert all(f'"name": "{name}/seed{seed}"' in html for name in VARIANTS.split(",") for seed in (0, 1))
    assert len(list((quick_run / "report_png").glob("*.png"))) >= 10


def test_every_exported_step_carries_the_replay_keys_and_each_run_its_variant_as_group(quick_run):
    for name in VARIANTS.split(","):
        for seed in (0, 1):
            folder = quick_run / "runs" / name / f"seed{seed}"
            lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
            assert len(lines) == QUICK["steps"]
            for line in lines:  # the correlations may be undefined (NaN, left out) on a step; these never are
                assert {
                    "episode/proxy_i_as_nats/mean",
                    "episode/proxy_oracle_reward/mean",
                    "selflock/oracle_reward_gap",
                } <= set(line["data"])
            assert any(
                "selflock/corr_as_oracle" in line["data"] and "selflock/corr_gap" in line["data"] for line in lines
            )
            assert json.loads((folder / "rollouts" / "run.json").read_text()) == {"group": name}
