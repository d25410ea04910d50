"""The lab's robustness studies (paper Appendix D), as data: ``arew lab --study NAME``.

A study is a named list of labelled arms; an arm is a variant name of the lab's grammar
(``arew.lab.config``) plus any further ``algorithm.arew`` keys, validated through
``arew.core.parse_config`` when the module loads. Every study runs with the lab's defaults
(``LabConfig()``, seeds 0-9) unless its ``settings`` override LabConfig fields.

Adding a study is one entry in ``STUDIES``::

    Study(
        "my-study",
        "what it tests, in one line",
        (
            arm("ppo-vanilla"),
            arm("ppo-as+bt", "ppo-as+bt-lam0.5", {"lam": 0.5}),
            arm("ppo-as+bt", "ppo-as+bt-late", {"schedule": {"start_step": 40}}),
        ),
    ),

then ``arew lab --study my-study``, and (for the README) a ``<!-- lab:study:my-study:start -->``
/ ``<!-- lab:study:my-study:end -->`` pair in ``docs/reference/lab-results.md`` and
``python -m docgen.lab_publish <out>/my-study``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from arew.lab.config import LabConfig, Variant, with_overrides

# the curves of a study's plot: the outcome, both channels, and the critique balance the studies perturb
STUDY_CURVES = {
    "reward": "outcome reward",
    "as_proxy": "AS proxy (informative queries per turn)",
    "bt_follow": "BT follows the evidence (sign agreement)",
    "pos_neg_token_ratio": "critiques +1 / -1 after the transforms",
}


@dataclass(frozen=True)
class Arm:
    label: str  # the arm's row in the table and its folder under runs/
    variant: str  # a name of the lab's grammar, e.g. ppo-as+bt
    arew: Mapping = field(default_factory=dict)  # further algorithm.arew keys, nested like the YAML


def arm(variant: str, label: str | None = None, arew: Mapping | None = None) -> Arm:
    return Arm(label or variant, variant, MappingProxyType(dict(arew or {})))


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    arms: tuple[Arm, ...]
    settings: Mapping = field(default_factory=dict)  # LabConfig overrides (none: the lab's defaults)
    table_columns: tuple[str, ...] = ("pos_neg_ratio_final",)  # report.STUDY_COLUMNS added to the table
    curves: Mapping = field(default_factory=lambda: STUDY_CURVES)

    def variants(self) -> list[Variant]:
        """The arms as the lab's variants (validated; the label becomes the variant's name)."""
        return [with_overrides(a.variant, a.arew, name=a.label) for a in self.arms]

    def config(self, base: LabConfig | None = None) -> LabConfig:
        """The LabConfig the study runs with: ``base`` (default ``LabConfig()``) plus its settings; the
        arms replace ``variants``, which is left empty."""
        return replace(base or LabConfig(), variants=(), **dict(self.settings))

    def to_dict(self) -> dict:
        """The definition as config.json records it (publishing compares it with this)."""
        return {
            "name": self.name,
            "arms": [{"label": v.name, "variant": a.variant, "arew": dict(v.overrides)} for a, v in zip(self.arms, self.variants())],
            "settings": dict(self.settings),
        }


def _sweep(base: str, label: str, key: str, values, fmt: str = "{:g}") -> tuple[Arm, ...]:
    """One arm per value of a dotted key, labelled ``<label><value>``."""
    return tuple(arm(base, f"{label}{fmt.format(v)}", {key: v}) for v in values)


FALSE_POSITIVES = Study(
    "false-positives",
    "Table 4: each -1 critique becomes +1 with probability p; AReW (as+bt) versus the intermediate-reward baseline, PPO",
    (
        arm("ppo-vanilla"),
        arm("ppo-as+bt"),
        arm("ppo-ir"),
        *(
            arm(f"ppo-{method}", f"ppo-{method}-p{p:g}", {"noise": {"neg_to_pos_prob": p}})
            for p in (0.3, 0.5)
            for method in ("as+bt", "ir")
        ),
    ),
)

DESTRUCTION = Study(
    "destruction",
    "Fig. 8: one channel only; only the first or last 40% of the turns' critiques (rest 0); "
    "the last 40% with the rest filled with 0, +1 or -1; PPO, as the paper",
    (
        arm("ppo-vanilla"),
        arm("ppo-as"),
        arm("ppo-bt"),
        arm("ppo-as+bt"),
        arm("ppo-as+bt", "ppo-as+bt-first0.4", {"window": {"keep": "first", "fraction": 0.4}}),
        # the last 40% with the rest 0 is both Fig. 8b's "last" and Fig. 8c's "fill 0"
        arm("ppo-as+bt", "ppo-as+bt-last0.4", {"window": {"keep": "last", "fraction": 0.4}}),
        arm("ppo-as+bt", "ppo-as+bt-last0.4-fill+1", {"window": {"keep": "last", "fraction": 0.4, "fill": 1}}),
        arm("ppo-as+bt", "ppo-as+bt-last0.4-fill-1", {"window": {"keep": "last", "fraction": 0.4, "fill": -1}}),
    ),
)

# Fig. 9b's legend values are not in the paper's text; a log-spaced sweep around the lab's
# lambda = 1 covers its "insufficient" and "overly aggressive" ends (0 is vanilla)
LAMBDA = Study(
    "lambda",
    "Fig. 9b: AReW strength lambda (as+bt, PPO); lambda 0 is vanilla",
    (arm("ppo-vanilla"), *_sweep("ppo-as+bt", "ppo-as+bt-lam", "lam", (0.1, 0.3, 1.0, 3.0, 10.0))),
)

GROUPING = Study(
    "grouping",
    "Pooled (one P/N set over AS and BT per trajectory) versus separate (one per channel), as+bt, PPO and GRPO",
    (
        arm("ppo-vanilla"),
        *(
            arm(f"{base}-as+bt", f"{base}-as+bt-{grouping}", {"grouping": grouping})
            for base in ("ppo", "grpo")
            for grouping in ("pooled", "separate")
        ),
    ),
)

FLIPS = (0.0, 0.1, 0.3, 0.5)


def _as_bt(base: str, alpha: float, suffix: str = "") -> str:
    """The lab's name of ``<base>-as+bt`` with sign-flip noise ``alpha`` (none at 0) and a suffix."""
    return f"{base}-as+bt{f'-flip{alpha:g}' if alpha else ''}{suffix}"


CRITIQUE_ACCURACY = Study(
    "critique-accuracy",
    "The live accuracy estimate (arew/<ch>/accuracy) under sign-flip noise alpha, whose true effect is known; "
    "PPO scores against each decision's GAE increment (direction auto) and, for comparison, its mean GAE advantage",
    (
        *(arm(_as_bt(base, alpha)) for base in ("ppo", "grpo") for alpha in FLIPS),
        *(arm(_as_bt("ppo", alpha), _as_bt("ppo", alpha, "-outcome"), {"quality": {"direction": "outcome"}}) for alpha in FLIPS),
    ),
    table_columns=("as_accuracy_train", "bt_accuracy_train", "as_positive_share_train"),
)

ADAPTIVE = Study(
    "adaptive",
    "Adaptive lambda (strength scaled by the smoothed accuracy after a 20-step warm-up) against fixed lambda "
    "at alpha = 0, 0.3, 0.5, and without the warm-up",
    (
        arm("ppo-vanilla"),
        arm("grpo-vanilla"),
        *(arm(_as_bt(base, alpha, suffix)) for base in ("ppo", "grpo") for alpha in (0.0, 0.3, 0.5) for suffix in ("", "-adaptive")),
        # without the warm-up: the estimate's blindness at the start of a self-locked run decides the factor
        *(arm(f"{base}-as+bt-adaptive", f"{base}-as+bt-adaptive-nowarmup", {"adaptive": {"warmup_steps": 0}}) for base in ("ppo", "grpo")),
    ),
    table_columns=("as_accuracy_train", "bt_accuracy_train", "as_positive_share_train", "as_adaptive_factor_train"),
)

SYNACT = Study(
    "synact",
    "SynAct's mutual-information critiques from GRPO's repeated rollouts, with the rule critiques off and on",
    (arm("grpo-vanilla"), arm("grpo-synact"), arm("grpo-as+bt"), arm("grpo-as+bt-synact")),
    table_columns=("as_outcome_constant_share_train", "bt_outcome_constant_share_train"),
)


# the judge's accuracy, from the rules' own labels (1) through chance (0.5) to the rules inverted (0)
JUDGE_ACCURACIES = (1.0, 0.9, 0.75, 0.6, 0.5, 0.4, 0.25, 0.0)

JUDGE_ACCURACY = Study(
    "judge-accuracy",
    "Prop. 4.1: the rules' critiques replaced by a simulated judge of known accuracy (arew.critiques.simulated), "
    "as+bt on PPO and GRPO; the judge at accuracy 1 must train exactly as the rules",
    tuple(
        arm(name)
        for base in ("ppo", "grpo")
        for name in (f"{base}-vanilla", f"{base}-as+bt", *(f"{base}-as+bt-judge{a:g}" for a in JUDGE_ACCURACIES))
    ),
    table_columns=(
        "as_rule_agreement_train",
        "bt_rule_agreement_train",
        "as_accuracy_train",
        "bt_accuracy_train",
        "as_proxy_early_drift",
    ),
)


def _baselines(name: str, task: str) -> Study:
    """The credit-assignment comparison on one task: each credit-assignment baseline alone and under AReW."""
    similar = {"credit": {"gigpo_match": "similar"}}
    return Study(
        name,
        f"Credit-assignment baselines on {task}: vanilla PPO (here also turn-level GAE: a lab decision is one token) and "
        "GRPO, GiGPO (exact and similar step groups) and turn-level GRPO alone, AReW on PPO and GRPO, and AReW on each baseline",
        (
            arm("ppo-vanilla"),
            arm("grpo-vanilla"),
            arm("gigpo-vanilla"),
            arm("gigpo-vanilla", "gigpo-similar-vanilla", similar),
            arm("tgrpo-as+bt", "tgrpo-alone", {"lam": 0.0}),  # its turn rewards are the critiques; no AReW term
            arm("ppo-as+bt"),
            arm("grpo-as+bt"),
            arm("gigpo-as+bt"),
            arm("gigpo-as+bt", "gigpo-similar-as+bt", similar),
            arm("tgrpo-as+bt"),
        ),
        settings={"task": task},
    )


BASELINES = _baselines("baselines", "pe-g-s2")
BASELINES_S3 = _baselines("baselines-s3", "pe-g-s3")

STUDIES: dict[str, Study] = {
    s.name: s
    for s in (FALSE_POSITIVES, DESTRUCTION, LAMBDA, GROUPING, CRITIQUE_ACCURACY, ADAPTIVE, SYNACT, JUDGE_ACCURACY, BASELINES, BASELINES_S3)
}

for _study in STUDIES.values():  # a bad arm fails at import, naming the key
    _labels = [a.label for a in _study.arms]
    if len(set(_labels)) != len(_labels):
        raise ValueError(f"study {_study.name!r}: duplicate arm labels")
    _study.variants()
