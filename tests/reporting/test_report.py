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
from arew.metrics.rollouts import write_run_record
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


def test_hostile_sizes_and_values_are_bounded_counted_and_still_drawn(tmp_path, make_run, make_episode):
    """Metrics of ±1e308 (the charts' axes overflowed: no PNG), a 5 MB key, a 10 MB turn, a line separator inside a
    JSON string (valid JSON; str.splitlines() cut the row in two) and a lone surrogate: the page and the PNGs are
    written, small, and the problems counted."""
    huge = make_episode(1, 1.0, [1, -1], agent="x" * 10_000_000)
    huge["numbers"]["k" * 5_000_000] = 1.0
    separated = make_episode(2, 0.0, [1, -1], agent="before\u2028after\u0085end")
    lone = make_episode(3, 0.0, [1, -1], agent="bad \ud800 text")
    run = make_run(tmp_path / "r", [{"step": s, "data": {"critic/score/mean": v, "k" * 5_000_000: 1.0}} for s, v in ((1, 1e308), (2, -1e308), (3, 0.5), (4, 0.25))],
                   [huge, separated])  # fmt: skip
    with open(run / "rollouts" / "train.jsonl", "a", encoding="utf-8", errors="surrogatepass") as f:
        f.write(json.dumps(lone, ensure_ascii=False) + "\n")  # a writer that kept the surrogate as it came
    out = report.build([run], tmp_path / "out" / "report.html", stderr=io.StringIO())
    assert out.stat().st_size < 3_000_000
    pngs = list((tmp_path / "out" / "report_png").glob("*.png"))
    assert pngs and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    data = embedded(out.read_text())
    problems = data["runs"][0]["problems"]
    assert problems["metrics.jsonl: value beyond ±1e+100"] == 2
    assert problems["metrics.jsonl: metric key longer than 200 characters"] == 4
    assert problems["episode number key longer than 200 characters"] == 1
    assert problems["turn text longer than 8000 characters, cut"] == 2  # both turns of the huge episode
    assert data["runs"][0]["episodes"] == 3 and "train.jsonl: invalid JSON line" not in problems
    agent = data["turn_fields"].index("agent")
    texts = [episode["turns"][0][agent] for episode in data["episodes"]]
    assert texts[1] == "before\u2028after\u0085end #0" and len(texts[0]) < 8100 and "more characters not shown" in texts[0]


def test_model_text_cannot_break_out_of_the_data_script(tmp_path, make_run, make_episode):
    run = make_run(tmp_path / "r", [{"step": 1, "data": {"critic/score/mean": 1.0}}],
                   [make_episode(1, 1.0, [1, -1], agent=INJECTION)])  # fmt: skip
    html = report.render(report.load_runs([run]), title="<b>t</b>")
    assert "<img src=x" not in html and 'alert("x")</script>' not in html and "<b>t</b>" not in html
    assert html.count("</script>") == 2  # the data element's and the program's, nothing from the data
    data = embedded(html)
    assert data["episodes"][0]["turns"][0][data["turn_fields"].index("agent")] == INJECTION + " #0"


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


def test_vanilla_exports_critiques_without_applied_values_and_only_the_monitors_arew_metrics(tmp_path):
    config = LabConfig(steps=2, episodes_per_step=4, group_size=4, train_tasks=8, test_tasks=4, hidden=8, replay_samples=20)
    result = train_run(config, parse_variant("grpo-vanilla"), 0)
    export.write_run(tmp_path / "run", result.log, result.critique_stats, result.rollouts, "grpo-vanilla")
    (run,) = report.load_runs([tmp_path / "run"])
    assert run.problems == {}
    # no critique statistics; the SynAct monitor's, as the trainer logs them for a vanilla GRPO run
    assert not [k for k in run.series if k.startswith("arew/") and not k.startswith("arew/synact/")]
    assert {"arew/synact/as/outcome_constant_share", "arew/synact/as/mi"} <= set(run.series)  # BT: no decision point (NaN)
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


# --- groups, shares and the page's weight ------------------------------------------------------


def _named_runs(tmp_path, make_run, names, group=None):
    folders = []
    for name in names:
        folder = make_run(tmp_path / name, [{"step": s, "data": {"critic/score/mean": s / 10}} for s in (1, 2)], [])
        if group is not None:
            write_run_record(folder / "rollouts", group)
        folders.append(folder)
    return folders


@pytest.mark.parametrize(
    ("names", "groups"),
    [
        (["lab/ppo-as/seed0", "lab/ppo-as/seed1", "lab/grpo-as/seed0"], ["ppo-as", "ppo-as", "grpo-as"]),
        (["exp-seed_2", "exp-seed3", "exp_s4", "other"], ["exp", "exp", "exp", "other"]),
        (["seedling", "x/seeds1"], ["seedling", "seeds1"]),  # no seed part: a run alone
    ],
)
def test_auto_groups_strip_a_trailing_seed_part(tmp_path, make_run, names, groups):
    runs = report.load_runs(_named_runs(tmp_path, make_run, names))
    assert report.assign_groups(runs) == list(dict.fromkeys(groups))
    assert [r.group for r in runs] == groups


def test_a_recorded_group_wins_unless_grouping_by_name_or_pattern(tmp_path, make_run):
    runs = report.load_runs(_named_runs(tmp_path, make_run, ["a/seed0", "b/seed0"], group="pe-g-s2-as_bt"))
    assert report.assign_groups(runs, "auto") == ["pe-g-s2-as_bt"]
    assert report.assign_groups(runs, "name") == ["a", "b"]
    assert report.assign_groups(runs, "none") == ["a/seed0", "b/seed0"]
    assert report.assign_groups(runs, "auto", pattern=r"^(\w)/") == ["a", "b"]
    assert report.assign_groups(runs, "auto", pattern=r"seed\d") == ["seed0"]  # no capture group: the match
    assert report.assign_groups(runs, "auto", pattern=r"^zzz") == ["a/seed0", "b/seed0"]  # unmatched: alone
    with pytest.raises(ValueError, match="group_by must be one of"):
        report.assign_groups(runs, "variant")


def test_a_broken_run_record_is_counted_and_the_name_rule_used(tmp_path, make_run):
    (folder,) = _named_runs(tmp_path, make_run, ["v/seed1"])
    (folder / "rollouts" / "run.json").write_text('{"group": 3}')
    (run,) = report.load_runs([folder])
    assert run.problems == {"rollouts/run.json: no group string": 1}
    assert report.assign_groups([run]) == ["v"]


def test_cli_refuses_a_pattern_that_is_not_a_regex(two_runs, tmp_path):
    from arew.cli import main

    with pytest.raises(SystemExit, match="--group-pattern"):
        main(["report", *map(str, two_runs), "--group-pattern", "(", "--out", str(tmp_path / "r.html")])


def test_groups_keep_their_colour_and_more_than_ten_get_dashes():
    styles = report.group_styles([f"g{i}" for i in range(12)])
    assert len({styles[f"g{i}"]["colour"] for i in range(10)}) == 10
    assert styles["g10"]["colour"] == styles["g0"]["colour"] and styles["g10"]["dash"] != styles["g0"]["dash"]


def test_critique_counts_are_drawn_as_shares_of_the_steps_decisions(two_runs):
    sections = {s["name"]: s for s in report.chart_data(report.load_runs(two_runs))}
    bt = next(p for p in sections["BT channel"]["panels"] if p["title"] == "BT critiques")
    assert bt["shares"] is True
    values = {s["key"]: s["values"] for s in bt["series"]}
    # run a logs pos, zero, neg = 2 + 0.1 s, 3 + 0.1 s, 4 + 0.1 s at step s (conftest's steps())
    for i, step in enumerate((1, 2, 3)):
        total = 9 + 0.3 * step
        assert values["arew/bt/pos"][i] == pytest.approx((2 + 0.1 * step) / total, rel=1e-4)
        assert sum(v[i] for v in values.values()) == pytest.approx(1.0, rel=1e-4)


def test_grouped_gives_mean_and_band_over_the_groups_runs():
    panel = {"series": [
        {"run": "x/seed0", "key": "k", "steps": [1, 2, 3], "values": [0.0, 2.0, 4.0]},
        {"run": "x/seed1", "key": "k", "steps": [1, 2], "values": [2.0, 2.0]},
        {"run": "y/seed0", "key": "k", "steps": [1], "values": [5.0]},
    ]}  # fmt: skip
    groups = {"x/seed0": "x", "x/seed1": "x", "y/seed0": "y"}
    steps, mean, low, high = report.grouped(panel, "k", groups, window=1)["x"]
    assert steps.tolist() == [1, 2, 3] and mean.tolist() == [1.0, 2.0, 4.0]
    assert low.tolist() == [0.0, 2.0, 4.0] and high.tolist() == [2.0, 2.0, 4.0]
    steps, mean, _, _ = report.grouped(panel, "k", groups, window=2)["x"]
    assert mean.tolist() == [1.0, 1.5, 3.0]  # seed0 smoothed to 0, 1, 3; seed1 to 2, 2


def test_a_default_lab_sized_page_stays_under_five_megabytes(tmp_path, make_run, make_episode):
    """27 runs (9 variants x 3 seeds) of 120 steps, every panel key a lab run logs, 4 episodes of 20 decisions per
    step with the lab's texts: 12,960 episodes, 25 MB of rollout JSONL, thinned to the byte budget."""
    keys = ["critic/score/mean", "episode/proxy_as_mean/mean", "episode/proxy_bt_mean/mean", "episode/proxy_c_bt/mean",
            "episode/proxy_bt_follow/mean", "episode/proxy_i_as_nats/mean", "selflock/corr_as_reward",
            "selflock/corr_as_oracle", "selflock/corr_gap", "selflock/oracle_reward_gap",
            *(f"arew/{c}/{k}" for c in ("as", "bt") for k in ("pos", "zero", "neg", "accuracy", "both_signs_frac")),
            "arew/both_signs_frac", "arew/abs_coef_per_token", "arew/abs_coef_per_traj", "arew/pos_neg_token_ratio",
            "arew/strength_factor", *(f"arew/synact/{c}/{k}" for c in ("as", "bt") for k in ("mi", "outcome_constant_share"))]  # fmt: skip
    text = "You asked whether the user prefers movie 4 to movie 7 on attributes 2, 3. User: No.\nNow state your updated estimate."
    folders = []
    for v in range(9):
        for seed in range(3):
            metrics = [{"step": s, "data": {k: (s * 0.0123456789 + i + v) % 1.7 for i, k in enumerate(keys)}} for s in range(1, 121)]
            episodes = [make_episode(s, 0.5, [1, -1, 0, 1] * 5, agent="<interact>0.55, 0.50, 0.50, 0.50, 0.45, 0.50</interact>")
                        for s in range(1, 121) for _ in range(4)]  # fmt: skip
            for e in episodes:
                for t in e["turns"]:
                    t["feedback"] = text
            folders.append(make_run(tmp_path / f"variant{v}" / f"seed{seed}", metrics, episodes))
    runs = report.load_runs(folders)
    html = report.render(runs)
    data = embedded(html)
    assert len(html.encode()) < 5_000_000
    assert [g["name"] for g in data["groups"]] == [f"variant{v}" for v in range(9)]
    shown = [r["shown"] for r in data["runs"]]
    assert min(shown) == max(shown) >= 10  # an even share per run, still enough to read
    steps = [e["step"] for e in data["episodes"] if e["run"] == "variant0/seed0"]
    assert steps[0] == 1 and steps[-1] == 120  # spread over the whole run


def test_a_panel_logged_only_as_null_is_told_apart_from_one_never_logged(tmp_path, make_run):
    metrics = [{"step": s, "data": {"critic/score/mean": 0.0, "selflock/corr_as_reward": None, "arew/as/accuracy": float("nan")}} for s in (1, 2)]
    run = make_run(tmp_path / "r", metrics, [])
    sections = {s["name"]: s for s in report.chart_data(report.load_runs([run]))}
    assert [m["title"] for m in sections["Self-locking"]["undefined"]] == ["AS proxy vs reward", "AS proxy vs reward, own and oracle (Obs. 2)"]
    assert "AS proxy vs reward" not in [m["title"] for m in sections["Self-locking"]["missing"]]
    assert [m["title"] for m in sections["Critiques"]["undefined"]] == ["Critique accuracy"]
    assert "Correlation gap" in [m["title"] for m in sections["Self-locking"]["missing"]]
