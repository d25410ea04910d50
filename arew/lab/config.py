"""The lab's knobs (one frozen dataclass with defaults) and the variant names it understands.

A variant name reads ``<base>-<method>[-synact][-judge<accuracy>][-flip<alpha>][-adaptive]``:

- base: ``ppo`` (verl's GAE with a small critic), ``grpo`` (verl's group-normalised outcome),
  ``gigpo`` (GiGPO: the group outcome plus a step-group term) or ``tgrpo`` (turn-level GRPO: the
  group outcome plus the group-normalised critiques, after the transforms, as turn rewards: with
  ``vanilla`` it is GRPO, alone it is ``tgrpo-as+bt`` with ``lam`` 0), the last two from
  :mod:`arew.core.credit`. A lab decision is one token, so turn-level GAE is ``ppo`` here;
- method: ``vanilla`` (outcome reward only), ``as``, ``bt`` or ``as+bt`` (AReW reweighting on
  those critique channels), or ``ir`` (the intermediate-reward baseline of Appendix A.2 with
  the AS and BT critiques);
- ``-judge<accuracy>`` (``as``, ``bt``, ``as+bt``, ``ir``): the rules' critiques are replaced by those of
  a simulated judge of that accuracy (:attr:`Variant.judge_accuracy`), before any transform;
- ``-flip<alpha>``: each non-zero critique's sign is flipped with probability alpha
  (the config's ``noise.flip_prob``, paper Table 2);
- ``-adaptive`` (AReW methods only): each channel's strength follows its measured critique
  accuracy (``adaptive.enabled=true``, see :mod:`arew.core.quality`).

GRPO only: method ``synact`` (SynAct's MI critiques on both channels, rule critiques off:
``synact.critiques=only``) and the suffix ``-synact`` on ``as``/``bt``/``as+bt`` (MI critiques
where the rule gave 0: ``synact.critiques=fill``), before any ``-flip``.

Beyond the grammar, a variant can carry any other ``algorithm.arew`` keys as overrides
(:func:`with_overrides`; the studies of ``arew.lab.studies`` are built that way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

from arew.core import AReWConfig, parse_config

BASES = ("ppo", "grpo", "gigpo", "tgrpo")
GROUP_BASES = ("grpo", "gigpo", "tgrpo")
"""Bases that roll out ``group_size`` episodes per task and compare them (no critic)."""
ESTIMATORS = {"ppo": "gae", "grpo": "grpo", "gigpo": "gigpo", "tgrpo": "turn_grpo"}
"""Each base's estimator, as the trainer names its base (``arew_<estimator>``)."""
METHODS = ("vanilla", "as", "bt", "as+bt", "ir", "synact")
JUDGED_METHODS = ("as", "bt", "as+bt", "ir")
"""Methods that train on the rules' critiques, which a simulated judge can replace."""
_NAME = re.compile(
    r"^(?P<base>ppo|grpo|gigpo|tgrpo)-(?P<method>vanilla|as\+bt|as|bt|ir|synact)(?P<synact>-synact)?"
    r"(?:-judge(?P<judge>[0-9]*\.?[0-9]+))?(?:-flip(?P<flip>[0-9]*\.?[0-9]+))?(?P<adaptive>-adaptive)?$"
)

DEFAULT_VARIANTS = (
    "ppo-vanilla",
    "ppo-as",
    "ppo-as+bt",
    "ppo-ir",
    "ppo-as+bt-flip0.3",
    "ppo-ir-flip0.3",
    "grpo-vanilla",
    "grpo-as",
    "grpo-as+bt",
)


@dataclass(frozen=True)
class Variant:
    """One training recipe: which base estimator, and how the critiques enter it."""

    name: str
    base: str
    method: str
    flip_prob: float = 0.0
    synact: str = "off"  # algorithm.arew.synact.critiques
    adaptive: bool = False
    # further ``algorithm.arew`` keys, dotted ("noise.neg_to_pos_prob") and sorted, applied last
    overrides: tuple[tuple[str, object], ...] = ()
    # None: the rules' critiques; a value in [0, 1]: each step's rule labels are replaced (combine mode
    # "replace") by arew.critiques.simulated's judge of that accuracy, drawn from the run's seed. It is
    # not an algorithm.arew key: in real runs the judge is a critique source (arew_agent.critiques).
    judge_accuracy: float | None = None

    def __post_init__(self) -> None:
        accuracy = self.judge_accuracy
        if accuracy is None:
            return
        if isinstance(accuracy, bool) or not isinstance(accuracy, int | float) or not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"variant {self.name!r}: judge_accuracy must be None or a number in [0, 1], got {accuracy!r}")
        if self.method not in JUDGED_METHODS:
            raise ValueError(
                f"variant {self.name!r}: judge_accuracy replaces the rules' critiques, which only {', '.join(JUDGED_METHODS)} train on"
            )

    @property
    def uses_critiques(self) -> bool:
        return self.method != "vanilla"

    def arew_config(self, lam: float, reward_coef: float, noise_seed: int, grouping: str = "pooled") -> AReWConfig:
        """The project's AReW config for this variant, built through its own validating parser."""
        channels = {"vanilla": "off", "ir": "as+bt", "synact": "as+bt"}.get(self.method, self.method)
        raw = {
            "channels": channels,
            "mode": "intermediate_reward" if self.method == "ir" else "reweight",
            "grouping": grouping,
            "weighting": "per_step",
            "lam": lam,
            "reward_coef": reward_coef,
            "noise": {"flip_prob": self.flip_prob, "seed": noise_seed},
            "synact": {"critiques": self.synact},
            "adaptive": {"enabled": self.adaptive},
        }
        for key, value in self.overrides:
            *sections, leaf = key.split(".")
            target = raw
            for section in sections:
                target = target.setdefault(section, {})
                if not isinstance(target, dict):
                    raise ValueError(f"variant {self.name!r}: override {key!r} goes below a non-section key")
            target[leaf] = value
        return parse_config(raw, prefix="lab.arew")


# keys a variant's method, base or run fix; an override may not change them
FIXED_KEYS = ("channels", "mode", "noise.seed")


def _dotted(overrides: Mapping, prefix: str = "") -> list[tuple[str, object]]:
    items = []
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            items += _dotted(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", value))
    return items


def with_overrides(variant: Variant | str, overrides: Mapping, name: str | None = None) -> Variant:
    """``variant`` (or its grammar name) with further ``algorithm.arew`` keys, nested or dotted.

    The result is validated at once through :func:`arew.core.parse_config` (a bad key or value
    fails naming ``lab.arew.<key>``). ``channels``, ``mode`` and ``noise.seed`` are refused: the
    method and the run's seed set them.
    """
    base = parse_variant(variant) if isinstance(variant, str) else variant
    merged = dict(base.overrides) | dict(_dotted(overrides))
    fixed = sorted(key for key in merged if key in FIXED_KEYS)
    if fixed:
        raise ValueError(f"variant {name or base.name!r}: override {fixed[0]!r} is set by the variant name or the seed")
    result = replace(base, name=name or base.name, overrides=tuple(sorted(merged.items())))
    result.arew_config(1.0, 0.1, noise_seed=0)
    return result


def parse_variant(name: str) -> Variant:
    """``Variant`` from its name; raises ``ValueError`` naming the grammar on a bad one."""
    match = _NAME.match(name.strip())
    if match is None:
        raise ValueError(
            f"bad variant {name!r}: expected <{'|'.join(BASES)}>-<{'|'.join(METHODS)}>[-synact][-judge<accuracy>][-flip<alpha>][-adaptive], "
            "e.g. ppo-as+bt-flip0.3"
        )
    flip = float(match["flip"]) if match["flip"] else 0.0
    if not 0.0 <= flip <= 1.0:
        raise ValueError(f"bad variant {name!r}: flip probability must lie in [0, 1]")
    synact = "only" if match["method"] == "synact" else "fill" if match["synact"] else "off"
    if synact == "fill" and match["method"] not in ("as", "bt", "as+bt"):
        raise ValueError(f"bad variant {name!r}: -synact goes on as, bt or as+bt")
    if synact != "off" and match["base"] not in GROUP_BASES:
        raise ValueError(f"bad variant {name!r}: SynAct's critiques compare the rollouts of a task, which only {', '.join(GROUP_BASES)} have")
    adaptive = match["adaptive"] is not None
    if adaptive and match["method"] in ("vanilla", "ir"):
        raise ValueError(f"bad variant {name!r}: -adaptive needs an AReW method (as, bt, as+bt or synact)")
    judge = float(match["judge"]) if match["judge"] else None
    return Variant(name.strip(), match["base"], match["method"], flip, synact, adaptive, judge_accuracy=judge)


@dataclass(frozen=True)
class LabConfig:
    """Everything one lab run depends on; the defaults are the README's measured setting.

    Policy initialisation puts the agent inside the self-locking regime of the paper's
    Thm. 3.4: ``salience_init`` makes it prefer "obvious" comparisons (large total score
    difference on the queried attributes, mostly dominated pairs, so few informative
    answers) and ``bt_init_probs`` makes its belief step ignore the feedback (a random walk).
    """

    task: str = "pe-g-s2"
    steps: int = 120
    episodes_per_step: int = 32
    group_size: int = 4  # GRPO rollouts per task; PPO uses one rollout per task
    train_tasks: int = 2048
    test_tasks: int = 256
    hidden: int = 16
    actor_lr: float = 0.01
    critic_lr: float = 0.01
    ppo_epochs: int = 2
    clip_ratio: float = 0.2
    value_clip: float = 0.5
    gamma: float = 1.0
    gae_lambda: float = 1.0
    arew_lambda: float = 1.0
    grouping: str = "pooled"  # one P/N set per trajectory (project default) or per channel ("separate")
    ir_coef: float = 0.1
    belief_step: float = 0.05
    step_bins: tuple[int, ...] = (-2, -1, 0, 1, 2)  # belief step per attribute, in units of belief_step
    bt_init_probs: tuple[float, ...] = (0.05, 0.2, 0.5, 0.2, 0.05)
    salience_init: float = 3.0
    replay_samples: int = 2000  # as the environment: I_AS in nats has converged there (see ReplayResult)
    smooth: int = 10  # moving-average window (steps) for "final" training values and reach times
    reach_reward: float = 0.5  # the table also reports the first step whose moving average reaches this
    variants: tuple[str, ...] = field(default=DEFAULT_VARIANTS)
    # ten seeds: the default run's conclusions are stated with bootstrap intervals over them (arew.lab.report),
    # because the arithmetic, and so a single seed's numbers, differ between processor vendors
    seeds: tuple[int, ...] = tuple(range(10))

    def __post_init__(self) -> None:
        if len(self.step_bins) != len(self.bt_init_probs):
            raise ValueError("step_bins and bt_init_probs need one entry per bin")
        if abs(sum(self.bt_init_probs) - 1.0) > 1e-6 or min(self.bt_init_probs) <= 0:
            raise ValueError("bt_init_probs must be positive and sum to 1")
        if self.episodes_per_step % self.group_size:
            raise ValueError("episodes_per_step must be a multiple of group_size")
        parse_config({"grouping": self.grouping, "lam": self.arew_lambda, "reward_coef": self.ir_coef}, prefix="lab")
        for name in self.variants:
            parse_variant(name)

    def to_dict(self) -> dict:
        return asdict(self)


QUICK = {
    "steps": 6,
    "episodes_per_step": 8,
    "group_size": 4,
    "train_tasks": 32,
    "test_tasks": 8,
    "hidden": 8,
    "replay_samples": 50,
    "smooth": 2,
    "seeds": (0,),
}
"""Overrides of ``--quick``: a seconds-long run that exercises every code path (for the tests)."""
