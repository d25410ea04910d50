"""The lab's simulated judge (``-judge<accuracy>``): the setting is validated, accuracy 1 trains exactly as
the rules, the measured agreement is the accuracy set, and the ``judge-accuracy`` study has its arms."""

import math
from dataclasses import replace

import pytest
import torch

from arew.lab.config import QUICK, LabConfig, Variant, parse_variant
from arew.lab.report import STUDY_COLUMNS, early_drift
from arew.lab.rollout import Rollout
from arew.lab.runner import run_key
from arew.lab.studies import JUDGE_ACCURACIES, STUDIES
from arew.lab.train import RunResult, judge_rollout, rule_agreement, train_run


def rollout_with(labels: torch.Tensor) -> Rollout:
    """A rollout with only the labels (and shapes) that the judge reads."""
    empty = torch.zeros(len(labels), 0)
    tensors = dict.fromkeys(
        ("pair_features", "pair_actions", "subset_features", "subset_actions", "bt_features", "bt_actions"), empty
    )
    return Rollout(
        **tensors,
        value_features=empty,
        old_log_probs=torch.zeros(labels.shape),
        values=None,
        labels=labels,
        valid=torch.ones(labels.shape, dtype=torch.bool),
        reward=torch.zeros(len(labels)),
        as_proxy=empty,
        bt_proxy=empty,
        task_index=torch.arange(len(labels)),
        texts=[],
        diagnostics={},
    )


def rule_labels(episodes: int = 4000, decisions: int = 20) -> torch.Tensor:
    """(B, 2H) rule labels: AS (even positions) +-1 as in PE, BT (odd) with 0s, as after a belief that did not move."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(-1, 2, (episodes, decisions), generator=g)
    labels[:, 0::2] = torch.where(labels[:, 0::2] == 0, 1, labels[:, 0::2])
    return labels


@pytest.mark.parametrize(
    "name, accuracy, flip",
    [("ppo-as+bt-judge0.75", 0.75, 0.0), ("grpo-ir-judge1-flip0.1", 1.0, 0.1), ("ppo-bt-judge.5-adaptive", 0.5, 0.0)],
)
def test_the_grammar_sets_the_judge_accuracy(name, accuracy, flip):
    variant = parse_variant(name)
    assert (variant.judge_accuracy, variant.flip_prob) == (accuracy, flip)
    assert parse_variant("ppo-as+bt").judge_accuracy is None  # the rules' critiques, as before
    # not an algorithm.arew key: the AReW config is the rules' arm's
    assert variant.arew_config(1.0, 0.1, 0) == replace(variant, judge_accuracy=None).arew_config(1.0, 0.1, 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: parse_variant("ppo-as+bt-judge1.5"),
        lambda: parse_variant("ppo-vanilla-judge0.9"),
        lambda: parse_variant("grpo-synact-judge0.9"),
        lambda: Variant("x", "ppo", "as+bt", judge_accuracy=-0.1),
        lambda: Variant("x", "ppo", "as+bt", judge_accuracy=math.nan),
        lambda: Variant("x", "ppo", "as+bt", judge_accuracy="0.9"),
        lambda: Variant("x", "ppo", "as+bt", judge_accuracy=True),
        lambda: LabConfig(variants=("ppo-as+bt-judge2",)),
    ],
)
def test_a_bad_judge_accuracy_names_the_key(make):
    with pytest.raises(ValueError, match="judge_accuracy"):
        make()


def test_the_judge_is_part_of_the_run_key():
    lab = LabConfig()
    rules = run_key(lab, parse_variant("ppo-as+bt"), 0)
    assert run_key(lab, parse_variant("ppo-as+bt-judge1"), 0) != rules
    assert run_key(lab, parse_variant("ppo-as+bt-judge0.9"), 0) != run_key(lab, parse_variant("ppo-as+bt-judge0.6"), 0)


@pytest.mark.parametrize("accuracy", [0.9, 0.75, 0.6, 0.5, 0.25])
def test_the_measured_agreement_is_the_accuracy_set_and_the_errors_are_as_documented(accuracy):
    rules = rule_labels()
    judged = judge_rollout(rollout_with(rules), accuracy, torch.Generator().manual_seed(3)).labels
    agreement = rule_agreement(judged, rules)
    per_channel = rules[:, 0::2].numel()
    for channel in ("as", "bt"):  # 5 standard errors of a share over 40 000 labels
        assert abs(agreement[f"{channel}_rule_agreement"] - accuracy) < 5 * math.sqrt(accuracy * (1 - accuracy) / per_channel)
    wrong = judged != rules
    assert torch.equal(judged[wrong & (rules != 0)], -rules[wrong & (rules != 0)])  # a +-1 becomes its opposite
    from_zero = judged[wrong & (rules == 0)]
    assert bool((from_zero != 0).all()) and abs(float((from_zero == 1).float().mean()) - 0.5) < 0.03  # 0 -> +-1, even odds
    again = judge_rollout(rollout_with(rules), accuracy, torch.Generator().manual_seed(3)).labels
    assert torch.equal(judged, again)  # the generator fixes the errors


def test_accuracy_one_and_zero_are_the_rules_and_their_opposite():
    rules = rule_labels(50)
    ro = rollout_with(rules)
    assert torch.equal(judge_rollout(ro, 1.0, torch.Generator().manual_seed(1)).labels, rules)
    inverted = judge_rollout(ro, 0.0, torch.Generator().manual_seed(1)).labels
    assert torch.equal(inverted[rules != 0], -rules[rules != 0]) and bool((inverted[rules == 0] != 0).all())
    assert rule_agreement(inverted, rules) == {"as_rule_agreement": 0.0, "bt_rule_agreement": 0.0}


def quick(steps: int = 2) -> LabConfig:
    return replace(LabConfig(), **{**QUICK, "steps": steps})


def strip(log):
    """The log without wall time and the agreement columns; NaN as a string, so that it compares equal."""
    return [
        {k: "nan" if v != v else v for k, v in row.items() if k != "seconds" and not k.endswith("_rule_agreement")}
        for row in log
    ]


def test_a_judge_of_accuracy_one_trains_exactly_as_the_rules():
    config = quick()
    rules, judge = (train_run(config, parse_variant(name), 0) for name in ("ppo-as+bt", "ppo-as+bt-judge1"))
    assert strip(judge.log) == strip(rules.log) and judge.final == rules.final
    assert judge.rollouts == rules.rollouts  # each turn's critique and the label AReW applied included
    assert all(row["as_rule_agreement"] == row["bt_rule_agreement"] == 1.0 for row in judge.log + rules.log)


def test_training_uses_the_judges_labels():
    """Accuracy 0 from the same seed: the same first batch, its AS critiques (never 0 in PE) inverted."""
    config = quick(steps=1)
    rules, inverted = (train_run(config, parse_variant(name), 0) for name in ("ppo-as+bt", "ppo-as+bt-judge0"))
    assert rules.log[0]["reward"] == inverted.log[0]["reward"]  # the same episodes
    assert inverted.log[0]["as_critique_pos"] == pytest.approx(1 - rules.log[0]["as_critique_pos"])
    assert inverted.log[0]["as_rule_agreement"] == inverted.log[0]["bt_rule_agreement"] == 0.0
    vanilla = train_run(config, parse_variant("ppo-vanilla"), 0)
    assert math.isnan(vanilla.log[0]["as_rule_agreement"])  # no critiques, nothing to agree


def test_the_judge_accuracy_study_is_registered_with_its_arms():
    study = STUDIES["judge-accuracy"]
    assert JUDGE_ACCURACIES == (1.0, 0.9, 0.75, 0.6, 0.5, 0.4, 0.25, 0.0)
    expected = [
        label
        for base in ("ppo", "grpo")
        for label in (f"{base}-vanilla", f"{base}-as+bt", *(f"{base}-as+bt-judge{a:g}" for a in JUDGE_ACCURACIES))
    ]
    assert [a.label for a in study.arms] == expected
    lab = LabConfig()
    for variant in study.variants():
        config = variant.arew_config(lab.arew_lambda, lab.ir_coef, noise_seed=0, grouping=lab.grouping)
        assert (config.mode, config.noise.flip_prob, config.grouping) == ("reweight", 0.0, "pooled")
        assert config.channels == ("off" if variant.method == "vanilla" else "as+bt")
        label_accuracy = float(variant.name.split("-judge")[1]) if "-judge" in variant.name else None
        assert variant.judge_accuracy == label_accuracy and variant.overrides == ()
    assert study.config() == replace(LabConfig(), variants=())  # the lab's defaults: seeds 0-2, 120 steps
    assert set(study.table_columns) <= set(STUDY_COLUMNS)
    assert set(study.table_columns) == {
        "as_rule_agreement_train", "bt_rule_agreement_train", "as_accuracy_train", "bt_accuracy_train", "as_proxy_early_drift"
    }  # fmt: skip


def test_the_early_drift_is_the_change_after_the_first_updates():
    log = [{"as_proxy": v} for v in (0.1, 0.2, 0.4, 0.9)]
    run = RunResult("a", 0, log, {}, 0.0)
    assert early_drift(run, "as_proxy", updates=2) == pytest.approx(0.2)  # mean(0.2, 0.4) - 0.1; step 4 is later
    assert early_drift(run, "as_proxy") == pytest.approx(0.4)  # a short run: every update it has
    assert early_drift(RunResult("a", 0, log[:1], {}, 0.0), "as_proxy") is None
    assert early_drift(RunResult("a", 0, [{"reward": 0.0}] * 3, {}, 0.0), "as_proxy") is None  # not logged
