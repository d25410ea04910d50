"""``arew lab --study``: the studies' arms are the intended AReW configs, a quick study runs end
to end (and resumes from its cache), and its table is published between its markers only."""

import json
from dataclasses import asdict, replace

import pytest
import torch

from arew.cli import build_parser
from arew.core import AReWConfigError
from arew.lab.config import DEFAULT_VARIANTS, QUICK, LabConfig, parse_variant, with_overrides
from arew.lab.report import final_ratio, summarise
from arew.lab.rollout import Rollout
from arew.lab.runner import run_key, training_sources
from arew.lab.studies import STUDIES, Study, arm
from arew.lab.train import RunResult, advantage_stage
from docgen.lab_publish import TARGETS as README_TARGETS
from docgen.lab_publish import PublishError, main, publish

# two trajectories of 3 turns (AS at even positions, BT at odd ones): 5 positives, 4 negatives
LABELS = torch.tensor([[1, -1, -1, 0, 1, 1], [-1, 1, 1, -1, 0, 0]])


def labelled_rollout() -> Rollout:
    """A rollout with only what the advantage stage reads (labels, reward, values, groups)."""
    empty = torch.zeros(2, 0)
    tensors = dict.fromkeys(
        ("pair_features", "pair_actions", "subset_features", "subset_actions", "bt_features", "bt_actions"), empty
    )
    return Rollout(
        **tensors,
        value_features=empty,
        old_log_probs=torch.zeros(LABELS.shape),
        values=torch.zeros(LABELS.shape),
        labels=LABELS,
        valid=torch.ones(LABELS.shape, dtype=torch.bool),
        reward=torch.tensor([1.0, 0.0]),
        as_proxy=torch.zeros(2, 3),
        bt_proxy=torch.zeros(2, 3),
        task_index=torch.tensor([0, 1]),
        texts=[],
        diagnostics={},
    )


def configs(name: str) -> dict:
    """label -> (base, the AReW config the arm trains with under the lab's defaults)."""
    lab = LabConfig()
    return {
        v.name: (v.base, v.arew_config(lab.arew_lambda, lab.ir_coef, noise_seed=7, grouping=lab.grouping))
        for v in STUDIES[name].variants()
    }


def test_false_positive_arms():
    arms = configs("false-positives")
    assert list(arms) == [
        "ppo-vanilla", "ppo-as+bt", "ppo-ir", "ppo-as+bt-p0.3", "ppo-ir-p0.3", "ppo-as+bt-p0.5", "ppo-ir-p0.5"
    ]  # fmt: skip
    for label, (base, config) in arms.items():
        assert base == "ppo" and config.noise.seed == 7 and config.noise.flip_prob == 0.0
        p = float(label.split("-p")[1]) if "-p" in label else 0.0
        assert config.noise.neg_to_pos_prob == p
        if label != "ppo-vanilla":
            assert config.channels == "as+bt"
            assert config.mode == ("intermediate_reward" if "-ir" in label else "reweight")
    assert arms["ppo-ir-p0.5"][1].reward_coef == LabConfig().ir_coef
    assert arms["ppo-vanilla"][1].channels == "off"


def test_destruction_arms():
    arms = configs("destruction")
    assert {label: c.channels for label, (_, c) in arms.items()} == {
        "ppo-vanilla": "off",
        "ppo-as": "as",
        "ppo-bt": "bt",
        "ppo-as+bt": "as+bt",
        "ppo-as+bt-first0.4": "as+bt",
        "ppo-as+bt-last0.4": "as+bt",
        "ppo-as+bt-last0.4-fill+1": "as+bt",
        "ppo-as+bt-last0.4-fill-1": "as+bt",
    }
    windows = {label: (c.window.keep, c.window.fraction, c.window.fill) for label, (_, c) in arms.items()}
    assert windows["ppo-as+bt"] == ("all", 0.4, 0)
    assert windows["ppo-as+bt-first0.4"] == ("first", 0.4, 0)
    assert windows["ppo-as+bt-last0.4"] == ("last", 0.4, 0)
    assert windows["ppo-as+bt-last0.4-fill+1"] == ("last", 0.4, 1)
    assert windows["ppo-as+bt-last0.4-fill-1"] == ("last", 0.4, -1)
    assert {base for base, _ in arms.values()} == {"ppo"}  # the paper's Fig. 8 is PPO


def test_lambda_and_grouping_arms():
    lams = {label: c.lam for label, (_, c) in configs("lambda").items() if label != "ppo-vanilla"}
    assert lams == {f"ppo-as+bt-lam{v:g}": v for v in (0.1, 0.3, 1.0, 3.0, 10.0)}
    grouping = {label: (base, c.grouping, c.channels) for label, (base, c) in configs("grouping").items()}
    assert grouping == {
        "ppo-vanilla": ("ppo", "pooled", "off"),
        "ppo-as+bt-pooled": ("ppo", "pooled", "as+bt"),
        "ppo-as+bt-separate": ("ppo", "separate", "as+bt"),
        "grpo-as+bt-pooled": ("grpo", "pooled", "as+bt"),
        "grpo-as+bt-separate": ("grpo", "separate", "as+bt"),
    }


def test_arm_overrides_win_over_the_command_line_and_are_validated():
    variant = with_overrides("ppo-as+bt-flip0.2", {"grouping": "separate", "lam_bt": 0.5}, name="x")
    config = variant.arew_config(lam=2.0, reward_coef=0.1, noise_seed=1, grouping="pooled")
    assert (config.grouping, config.lam, config.lam_bt, config.noise.flip_prob) == ("separate", 2.0, 0.5, 0.2)
    assert variant.overrides == (("grouping", "separate"), ("lam_bt", 0.5)) and variant.name == "x"
    with pytest.raises(AReWConfigError, match=r"lab\.arew\.noise\.neg_to_pos_prob"):
        with_overrides("ppo-as", {"noise": {"neg_to_pos_prob": 1.5}})
    with pytest.raises(AReWConfigError, match=r"lab\.arew\.window\.bogus"):
        with_overrides("ppo-as", {"window.bogus": 1})
    for fixed in ({"mode": "intermediate_reward"}, {"channels": "bt"}, {"noise": {"seed": 3}}):
        with pytest.raises(ValueError, match="set by the variant name or the seed"):
            with_overrides("ppo-as", fixed)


def test_the_default_study_is_unchanged():
    assert LabConfig().variants == DEFAULT_VARIANTS and len(DEFAULT_VARIANTS) == 9
    for name in DEFAULT_VARIANTS:
        assert parse_variant(name).overrides == ()
    config = parse_variant("ppo-ir-flip0.3").arew_config(1.0, 0.1, noise_seed=2)
    assert (config.channels, config.mode, config.noise.flip_prob, config.noise.neg_to_pos_prob) == (
        "as+bt",
        "intermediate_reward",
        0.3,
        0.0,
    )
    assert config.window.keep == "all" and config.grouping == "pooled" and config.weighting == "per_step"


def test_identical_arms_share_one_run():
    lab = LabConfig()
    plain = run_key(lab, parse_variant("ppo-as+bt"), 0)
    assert run_key(lab, with_overrides("ppo-as+bt", {"lam": 1.0}, name="ppo-as+bt-lam1"), 0) == plain
    assert run_key(lab, with_overrides("ppo-as+bt", {"grouping": "pooled"}, name="y"), 0) == plain
    assert run_key(replace(lab, seeds=(0,)), parse_variant("ppo-as+bt"), 0) == plain  # seeds list: not part
    assert run_key(lab, with_overrides("ppo-as+bt", {"lam": 3.0}), 0) != plain
    assert run_key(lab, parse_variant("ppo-as+bt"), 1) != plain
    assert run_key(lab, parse_variant("grpo-as+bt"), 0) != plain
    assert run_key(replace(lab, steps=7), parse_variant("ppo-as+bt"), 0) != plain


def test_the_positive_negative_ratio_is_logged_from_the_arew_statistics():
    lab = LabConfig()
    for name, ratio in (("ppo-as+bt", 5 / 4), ("ppo-ir", 5 / 4), ("ppo-as", 3 / 2), ("ppo-bt", 2 / 2)):
        variant = parse_variant(name)
        stats = advantage_stage(labelled_rollout(), variant, variant.arew_config(1.0, 0.1, 0), lab, 1).injection.stats
        assert stats["arew/pos_neg_token_ratio"] == pytest.approx(ratio)
    false_pos = with_overrides("ppo-as+bt", {"noise": {"neg_to_pos_prob": 1.0}})
    stats = advantage_stage(labelled_rollout(), false_pos, false_pos.arew_config(1.0, 0.1, 0), lab, 1).injection.stats
    assert "arew/pos_neg_token_ratio" not in stats and stats["arew/neg_tokens"] == 0  # every -1 became +1
    log = [{"pos_neg_token_ratio": v, "reward": 0.0} for v in (9.0, None, 1.0, 3.0)]
    assert final_ratio(RunResult("a", 0, log, {}, 0.0), 3) == pytest.approx(2.0)  # steps without a ratio skipped
    assert final_ratio(RunResult("a", 0, [{"pos_neg_token_ratio": None}], {}, 0.0), 3) is None


def test_summary_rows_follow_the_arms_not_the_grammar():
    study = Study("t", "test", (arm("ppo-vanilla"), arm("ppo-as", "ppo-as-strong", {"lam": 5.0})))
    config = replace(study.config(), seeds=(0, 1), smooth=1)
    final = {k: 0.5 for k in ("reward", "as_proxy", "bt_proxy", "c_bt", "bt_follow", "i_as_nats", "oracle_reward")}
    log = [{"reward": 0.1, "pos_neg_token_ratio": None}, {"reward": 0.9, "pos_neg_token_ratio": 2.0}]
    results = [RunResult(label, seed, log, final, 1.0) for label in ("ppo-vanilla", "ppo-as-strong") for seed in (0, 1)]
    rows = summarise(config, results, study.variants())
    assert [r["variant"] for r in rows] == ["ppo-vanilla", "ppo-as-strong"]
    assert rows[1]["method"] == "as" and json.loads(rows[1]["overrides"]) == {"lam": 5.0}
    assert rows[1]["pos_neg_ratio_final"] == pytest.approx(2.0)
    assert rows[1]["steps_to_vanilla_final"] == 2 and rows[1]["reached_vanilla_final"] == 2


def run_cli(*argv):
    args = build_parser().parse_args(["lab", *argv])
    args.func(args)


@pytest.fixture(scope="module")
def quick_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    run_cli("--study", "grouping", "--quick", "--out", str(out), "--workers", "1")
    return out


@pytest.mark.lab
def test_a_quick_study_writes_its_table_plot_logs_and_definition(quick_study):
    folder = quick_study / "grouping"
    labels = [a.label for a in STUDIES["grouping"].arms]
    lines = (folder / "results.md").read_text().strip().splitlines()
    assert "| pos/neg ratio (final) |" in lines[0] and all(line.count("|") == lines[0].count("|") for line in lines)
    assert [line.split("|")[1].strip() for line in lines[2:]] == labels
    assert lines[2].split("|")[11].strip() == "-"  # vanilla has no critiques, so no ratio
    assert all(float(line.split("|")[11]) > 0 for line in lines[3:])
    for base in ("ppo", "grpo"):
        assert (folder / f"curves_{base}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = json.loads((folder / "config.json").read_text())
    assert meta["study"] == json.loads(json.dumps(STUDIES["grouping"].to_dict()))
    assert meta["config"]["variants"] == [] and meta["config"]["steps"] == QUICK["steps"]
    for label in labels:
        payload = json.loads((folder / "runs" / label / "seed0.json").read_text())
        assert payload["variant"] == label and len(payload["log"]) == QUICK["steps"]
        assert "pos_neg_token_ratio" in payload["log"][0]
    # pooled is the lab's default grouping: the arm is the plain ppo-as+bt run; separate differs
    pooled = json.loads((folder / "runs" / "ppo-as+bt-pooled" / "seed0.json").read_text())
    separate = json.loads((folder / "runs" / "ppo-as+bt-separate" / "seed0.json").read_text())
    assert pooled["log"][1:] != separate["log"][1:]


@pytest.mark.lab
def test_a_study_resumes_from_its_cache(quick_study, monkeypatch):
    before = (quick_study / "grouping" / "results.md").read_text()

    def no_training(*args, **kwargs):
        raise AssertionError("every run should come from the cache")

    monkeypatch.setattr("arew.lab.train.train_run", no_training)
    run_cli("--study", "grouping", "--quick", "--out", str(quick_study), "--workers", "1")
    assert (quick_study / "grouping" / "results.md").read_text() == before


def test_a_cached_run_is_reused_only_by_the_code_that_computed_it(monkeypatch):
    sources = {name: path.as_posix() for name, path in training_sources().items()}
    # the trainer, the method's core, the policy and the task it trains on, lazy imports included
    assert {"arew.lab.train", "arew.core.reweight", "arew.lab.agent", "arew_preference.env"} <= set(sources)
    assert sources["arew_preference.env"].endswith("arew_preference/env.py")
    # the output writers (the lab's report, the docs' marked blocks and their publisher) and the command line do not
    # change a run
    writers = {"arew.lab.report", "arew.reporting.markdown_blocks", "docgen.lab_publish", "arew.lab.runner", "arew.lab.compare"}
    assert not (writers | {"arew.cli"}) & set(sources)
    config, variant = LabConfig(), parse_variant("ppo-as")
    key = run_key(config, variant, 0)
    monkeypatch.setattr("arew.lab.runner.source_fingerprint", lambda: "another version of the code")
    assert run_key(config, variant, 0) != key


def test_study_command_line_errors(tmp_path):
    with pytest.raises(SystemExit, match="unknown study"):
        run_cli("--study", "nope", "--quick", "--out", str(tmp_path))
    with pytest.raises(SystemExit, match="exclude"):
        run_cli("--study", "lambda", "--variants", "ppo-as", "--out", str(tmp_path))


def _study_run(tmp_path, name="lambda", config=None, definition=None):
    run = tmp_path / name
    run.mkdir(parents=True)
    (run / "results.md").write_text(f"| variant | reward |\n|---|---|\n| {name}-row | 0.5 ± 0.1 |\n")
    study = STUDIES[name]
    meta = {"study": definition or study.to_dict(), "config": asdict(config or study.config()), "wall_seconds": 1.0}
    (run / "config.json").write_text(json.dumps(meta))
    return run


README = (
    "# lab\n<!-- lab:default:start -->\ndefault table\n<!-- lab:default:end -->\n"
    "prose `<!-- lab:study:lambda:start -->`\n"
    "<!-- lab:study:lambda:start -->\nold\n<!-- lab:study:lambda:end -->\nmiddle\n"
    "<!-- lab:study:grouping:start -->\nold\n<!-- lab:study:grouping:end -->\nend"
)


def test_publish_writes_exactly_between_the_study_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    run = _study_run(tmp_path)
    publish(run, (readme,))
    table = (run / "results.md").read_text()
    assert readme.read_text() == README.replace(
        "<!-- lab:study:lambda:start -->\nold\n", "<!-- lab:study:lambda:start -->\n" + table
    )
    _study_run(tmp_path / "all", "grouping")
    _study_run(tmp_path / "all", "lambda")
    main([str(tmp_path / "all"), "--target", str(readme)])  # a --study all folder publishes each study
    text = readme.read_text()
    assert "| grouping-row |" in text and "| lambda-row |" in text and "default table" in text
    assert text.count("old") == 0 and text.endswith("end")


def test_publish_refuses_a_study_run_that_is_not_the_studys_default(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    quick = _study_run(tmp_path / "q", config=replace(STUDIES["lambda"].config(), steps=6))
    with pytest.raises(PublishError, match="steps"):
        publish(quick, (readme,))
    changed = STUDIES["lambda"].to_dict()
    changed["arms"] = changed["arms"][:-1]
    edited = _study_run(tmp_path / "e", definition=changed)
    with pytest.raises(PublishError, match="study.arms"):
        publish(edited, (readme,))
    with pytest.raises(SystemExit, match="not the 'lambda' study"):
        main([str(quick), "--target", str(readme)])
    assert readme.read_text() == README
    publish(quick, (readme,), any_config=True)
    assert "| lambda-row |" in readme.read_text()
    # a study run is not the default study either, and the default publish refuses it
    default = json.loads((quick / "config.json").read_text())
    del default["study"]
    (quick / "config.json").write_text(json.dumps(default))
    with pytest.raises(PublishError, match="not the default study"):
        publish(quick, (readme,))


def test_the_lab_readme_has_a_block_per_study():
    text = README_TARGETS[0].read_text()
    for name in STUDIES:
        assert f"\n<!-- lab:study:{name}:start -->\n" in text and f"\n<!-- lab:study:{name}:end -->" in text


def test_adding_a_study_is_data():
    study = Study("extra", "one more", (arm("ppo-as+bt", "ppo-as+bt-late", {"schedule": {"start_step": 40}}),))
    (variant,) = study.variants()
    assert variant.arew_config(1.0, 0.1, 0).schedule.start_step == 40
    assert study.to_dict()["arms"] == [
        {"label": "ppo-as+bt-late", "variant": "ppo-as+bt", "arew": {"schedule.start_step": 40}}
    ]
