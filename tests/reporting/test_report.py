"""arew report without a browser: reading runs, bad input, escaping, chart data; the lab's export."""

from __future__ import annotations

import io
import json
import re

import pytest
import torch

from arew.lab import export
from arew.lab.config import LabConfig, parse_variant
from arew.lab.train import LOG_COLUMNS, train_run
from arew.reporting import report
from arew.reporting.panels import SECTIONS, panels

INJECTION = '</script><script>alert("x")</script><img src=x onerror="document.title=\'owned\'">'


def embedded(html: str) -> dict:
    """The page's data, read back the way the browser does (the JSON inside its script element)."""
    match = re.search(r'<script type="application/json" id="arew-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def test_runs_are_read_into_series_and_episodes_in_the_contract_schema(two_runs):
    a, b = report.load_runs(two_runs)
    assert (a.name, b.name) == ("a", "b")
    assert a.series["critic/score/mean"] == [(1, pytest.approx(0.1)), (2, pytest.approx(0.2)), (3, pytest.approx(0.3))]
    assert a.problems == {} and b.problems == {}
    assert [e["split"] for e in b.episodes] == ["train", "val"]
    turn = a.episodes[0]["turns"][1]
    assert turn == {"index": 1, "turn": 1, "channel": "bt", "agent": "ask 1 vs 2 #1", "feedback": "reply 1",
                    "critique": -1, "applied": -1, "coefficient": -0.25}  # fmt: skip
    assert b.episodes[1]["turns"][0]["applied"] is None  # val: no advantage stage


def test_a_metrics_file_given_directly_is_its_run_and_same_named_folders_get_longer_names(tmp_path, make_run):
    first = make_run(tmp_path / "grpo-as" / "seed0", [{"step": 1, "data": {"critic/score/mean": 1.0}}], [])
    second = make_run(tmp_path / "grpo-bt" / "seed0", [{"step": 1, "data": {"critic/score/mean": 0.0}}], [])
    runs = report.load_runs([first / "metrics.jsonl", second])
    assert [r.name for r in runs] == ["grpo-as/seed0", "grpo-bt/seed0"]
    assert runs[0].series == {"critic/score/mean": [(1, 1.0)]}


def test_panels_no_run_logged_are_listed_not_drawn_and_every_run_is_overlaid(two_runs):
    sections = {s["name"]: s for s in report.chart_data(report.load_runs(two_runs))}
    reward = next(p for p in sections["Outcome reward"]["panels"] if p["title"] == "Training reward")
    assert [s["run"] for s in reward["series"]] == ["a", "b"]
    bt = {p["title"]: p for p in sections["BT channel"]["panels"]}
    assert [s["run"] for s in bt["BT proxy"]["series"]] == ["b"]
    assert [s["key"] for s in bt["BT critiques"]["series"]] == ["arew/bt/pos", "arew/bt/zero", "arew/bt/neg"]
    assert "C_BT" in [m["title"] for m in sections["BT channel"]["missing"]]
    drawn = sum(len(s["panels"]) for s in sections.values())
    missing = sum(len(s["missing"]) for s in sections.values())
    assert (drawn, drawn + missing) == (4, len(panels()))


def test_star_patterns_draw_each_data_source(tmp_path, make_run):
    keys = {"val-core/arew/pe-g-s2/reward/mean@4": 0.5, "val-core/arew/mediq/reward/mean@4": 0.25}
    run = make_run(tmp_path / "r", [{"step": 2, "data": keys}], [])
    sections = report.chart_data(report.load_runs([run]))
    validation = sections[0]["panels"][0]
    assert validation["title"] == "Validation reward"
    assert sorted(s["key"] for s in validation["series"]) == sorted(keys)


def test_bad_input_is_counted_shown_and_skipped(tmp_path, make_run, make_episode):
    run = make_run(tmp_path / "bad", [{"step": 1, "data": {"critic/score/mean": 0.5, "x/text": "high", "x/nan": float("nan"), "x/none": None, "x/inf": float("inf")}}],
                   [make_episode(1, 1.0, [1, -1])])  # fmt: skip
    with open(run / "metrics.jsonl", "a") as f:
        f.write('[1, 2]\n{"step": "two", "data": {}}\n{"step": 3, "data": {"critic/sco')  # a run cut off mid-line
    with open(run / "rollouts" / "train.jsonl", "a") as f:
        f.write('{"split": "train", "reward": "lots", "turns": [{"agent": null}, 7]}\n{"no": "turns"}\n{"trunc')
    stderr = io.StringIO()
    out = report.build([run, tmp_path / "nowhere"], tmp_path / "out" / "report.html", pngs=False, stderr=stderr)
    bad, nowhere = embedded(out.read_text())["runs"]
    assert bad["problems"] == {
        "metrics.jsonl: invalid JSON line": 1,
        "metrics.jsonl: line is not a JSON object": 1,
        "metrics.jsonl: line without a numeric step and a data object": 1,
        "metrics.jsonl: non-numeric or infinite value": 2,
        "train.jsonl: invalid JSON line": 1,
        "episode without a turns list": 1,
        "episode with a non-numeric reward": 1,
    }
    assert nowhere["problems"] == {"run folder or file does not exist": 1}
    assert bad["episodes"] == 2  # the good one and the one with a bad reward (kept, reward unknown)
    assert "bad: metrics.jsonl: invalid JSON line (x1)" in stderr.getvalue()
    assert "nowhere: run folder or file does not exist (x1)" in stderr.getvalue()


def test_model_text_cannot_break_out_of_the_data_script(tmp_path, make_run, make_episode):
    run = make_run(tmp_path / "r", [{"step": 1, "data": {"critic/score/mean": 1.0}}],
                   [make_episode(1, 1.0, [1, -1], agent=INJECTION)])  # fmt: skip
    html = report.render(report.load_runs([run]), title="<b>t</b>")
    assert "<img src=x" not in html and 'alert("x")</script>' not in html and "<b>t</b>" not in html
    assert html.count("</script>") == 2  # the data element's and the program's, nothing from the data
    assert embedded(html)["episodes"][0]["turns"][0]["agent"] == INJECTION + " #0"


def test_pngs_one_per_drawn_panel(two_runs, tmp_path):
    out = report.build(two_runs, tmp_path / "rep.html")
    pngs = sorted(p.name for p in (tmp_path / "rep_png").iterdir())
    assert len(pngs) == 4 and "outcome-reward--training-reward.png" in pngs
    assert all((tmp_path / "rep_png" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert out.exists()


def test_an_eval_episodes_file_is_a_run_of_eval_episodes(tmp_path):
    record = {"name": "test:3:0", "task": "mediq", "data_source": "mediq", "row": 3, "session": 0, "reward": 1.0,
              "failed": None, "info": {"decisions": 2.0},
              "turns": [{"agent": "Q?", "channel": "as", "critique": 1, "feedback": "A."},
                        {"agent": "I think B", "channel": "bt", "critique": -1, "feedback": None}]}  # fmt: skip
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    (run,) = report.load_runs([tmp_path / "eval"])
    (ep,) = run.episodes
    assert (ep["split"], ep["episode"], ep["numbers"]) == ("eval", "test:3:0", {"decisions": 2.0})
    assert [(t["index"], t["critique"], t["applied"]) for t in ep["turns"]] == [(0, 1, None), (1, -1, None)]
    assert run.problems == {}


def test_cli_report_writes_the_page(two_runs, tmp_path, capsys):
    from arew.cli import main

    main(["report", *map(str, two_runs), "--out", str(tmp_path / "r.html")])
    assert f"arew report: {tmp_path / 'r.html'}" in capsys.readouterr().out
    assert len(embedded((tmp_path / "r.html").read_text())["episodes"]) == 6


# --- the lab's export --------------------------------------------------------------------------


def test_lab_columns_map_to_the_trainers_panel_keys():
    panel_keys = {k for p in panels() for k in p.keys}
    for column in ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow"):
        assert export.METRIC_KEYS[column] in panel_keys
    row = {column: float(i) for i, column in enumerate(LOG_COLUMNS)}
    entry = export.metrics_entry(row, {"arew/as/pos": 3.0})
    assert entry["step"] == 0 and entry["data"]["training/global_step"] == 0
    assert entry["data"]["critic/score/mean"] == row["reward"] and entry["data"]["arew/as/pos"] == 3.0
    assert entry["data"]["lab/adv_shift"] == row["adv_shift"]  # no trainer key for it: kept under lab/


@pytest.mark.parametrize("name", ["grpo-as+bt", "ppo-as", "grpo-as+bt-adaptive", "grpo-synact"])
def test_exported_coefficient_is_the_reweighted_minus_the_base_advantage(name):
    config = LabConfig(steps=1, episodes_per_step=8, group_size=4, train_tasks=16, test_tasks=4, hidden=8, replay_samples=20)
    result = train_run(config, parse_variant(name), 0)
    assert len(result.rollouts) == export.ROLLOUTS_PER_STEP and len(result.critique_stats) == 1
    # replay the step from the same seed and compare with the advantage stage itself
    from arew.lab import train as lab_train

    seen = {}
    original = lab_train.advantage_stage

    def spy(*args):
        stage = original(*args)
        seen.update(ro=args[0], stage=stage)
        return stage

    lab_train.advantage_stage = spy
    try:
        again = train_run(config, parse_variant(name), 0)
    finally:
        lab_train.advantage_stage = original
    assert again.rollouts == result.rollouts  # deterministic sample
    stage = seen["stage"]
    shift = (stage.advantages - stage.base).double()
    for episode, b in zip(result.rollouts, export.sampled_indices(len(seen["ro"].labels))):
        coefficients = torch.tensor([t["coefficient"] for t in episode["turns"]], dtype=torch.float64)
        assert torch.allclose(coefficients, shift[b], atol=1e-6)
        assert [t["critique"] for t in episode["turns"]] == seen["ro"].labels[b].tolist()
        assert [t["agent"] for t in episode["turns"]] == seen["ro"].texts[b][: len(episode["turns"])]
    assert result.critique_stats[0]["arew/as/pos"] == float((stage.injection.labels.view(8, -1)[:, 0::2] == 1).sum())


def test_vanilla_exports_critiques_without_applied_values_and_no_arew_metrics(tmp_path):
    config = LabConfig(steps=2, episodes_per_step=4, group_size=4, train_tasks=8, test_tasks=4, hidden=8, replay_samples=20)
    result = train_run(config, parse_variant("grpo-vanilla"), 0)
    export.write_run(tmp_path / "run", result.log, result.critique_stats, result.rollouts)
    (run,) = report.load_runs([tmp_path / "run"])
    assert run.problems == {}
    assert not [k for k in run.series if k.startswith("arew/")]
    assert {export.METRIC_KEYS[c] for c in ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow")} <= set(run.series)
    assert len(run.episodes) == 2 * export.ROLLOUTS_PER_STEP
    assert all(t["applied"] is None and t["coefficient"] is None for e in run.episodes for t in e["turns"])
    assert all(t["feedback"] for e in run.episodes for t in e["turns"])  # the environment's reply to each decision


def test_sections_are_those_of_the_panel_list(two_runs):
    assert [s["name"] for s in report.chart_data(report.load_runs(two_runs))] == [s.name for s in SECTIONS]


def test_too_many_episodes_are_thinned_evenly_per_run(two_runs, monkeypatch):
    monkeypatch.setattr(report, "MAX_EPISODES", 4)
    data = embedded(report.render(report.load_runs(two_runs)))
    assert [(r["name"], r["episodes"], r["shown"]) for r in data["runs"]] == [("a", 4, 2), ("b", 2, 2)]
    assert [(e["run"], e["step"]) for e in data["episodes"]] == [("a", 1), ("a", 3), ("b", 1), ("b", 2)]
