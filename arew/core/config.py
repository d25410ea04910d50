"""The ``arew`` configuration section: typed, defaulted, validated at start-up.

It lives under ``algorithm.arew`` in a verl config (verl passes the algorithm section to
advantage estimators, and unknown keys there survive its dataclass conversion). Every key
has a default; ``configs/base/arew.yaml`` documents them one per line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from arew.core.records import CHANNELS

CHANNEL_SETS = {"off": (), "as": ("as",), "bt": ("bt",), "as+bt": ("as", "bt")}
MODES = ("reweight", "intermediate_reward")
GROUPINGS = ("pooled", "separate")
WEIGHTINGS = ("per_step", "minority_fixed", "fixed_pos", "fixed_neg", "abs_sum", "step_abs_sum")
NEGATIVES = ("full", "prefix", "suffix")
WINDOWS = ("all", "first", "last")
ON_INVALID = ("raise", "drop")
SYNACT_CRITIQUES = ("off", "only", "fill")
DIRECTIONS = ("auto", "outcome", "increment")


class AReWConfigError(ValueError):
    """An ``arew`` config value is invalid; the message names the full key."""


@dataclass(frozen=True)
class ScheduleConfig:
    start_step: int = 0
    end_step: int | None = None
    warmup_steps: int = 0


@dataclass(frozen=True)
class NoiseConfig:
    flip_prob: float = 0.0
    neg_to_pos_prob: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class WindowConfig:
    keep: str = "all"
    fraction: float = 0.4
    fill: int = 0


@dataclass(frozen=True)
class SynActConfig:
    monitor: bool = True
    critiques: str = "off"
    min_rollouts: int = 2


@dataclass(frozen=True)
class QualityConfig:
    """The live critique-accuracy estimate (:mod:`arew.core.quality`): smoothing and the near-chance warning."""

    ema: float = 0.9
    chance_band: float = 0.05
    warn_after_steps: int = 10
    min_decisions: int = 1
    direction: str = "auto"  # what each decision's critique is scored against, see arew.core.quality.resolve_direction


@dataclass(frozen=True)
class AdaptiveConfig:
    """Scale each channel's strength by its smoothed accuracy: 0 at chance, 1 from ``full_at`` on, after a warm-up."""

    enabled: bool = False
    full_at: float = 0.7
    warmup_steps: int = 20  # global steps 1..warmup_steps keep the full strength (the estimate is still measured)


@dataclass(frozen=True)
class AReWConfig:
    channels: str = "as+bt"
    mode: str = "reweight"
    grouping: str = "pooled"
    weighting: str = "per_step"
    negatives: str = "full"
    lam: float = 1.0
    lam_as: float | None = None
    lam_bt: float | None = None
    reward_coef: float = 0.1
    on_invalid: str = "raise"
    dump_dir: str | None = None
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    synact: SynActConfig = field(default_factory=SynActConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)

    @property
    def enabled_channels(self) -> tuple[str, ...]:
        return CHANNEL_SETS[self.channels]

    def channel_lambdas(self) -> tuple[float, ...]:
        """Strength per channel (index order of ``CHANNELS``); pooled mode uses ``lam``."""
        if self.grouping == "pooled":
            return tuple(self.lam for _ in CHANNELS)
        overrides = {"as": self.lam_as, "bt": self.lam_bt}
        return tuple(self.lam if overrides[c] is None else overrides[c] for c in CHANNELS)


def _fail(key: str, message: str) -> None:
    raise AReWConfigError(f"{key}: {message}")


def _number(key: str, value, *, low: float | None = None, high: float | None = None, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(key, f"expected a number, got {value!r}")
    if not math.isfinite(value):
        _fail(key, f"must be finite, got {value!r}")
    if integer and int(value) != value:
        _fail(key, f"expected an integer, got {value!r}")
    if low is not None and value < low:
        _fail(key, f"must be >= {low}, got {value!r}")
    if high is not None and value > high:
        _fail(key, f"must be <= {high}, got {value!r}")
    return int(value) if integer else float(value)


def _choice(key: str, value, options) -> str:
    if not isinstance(value, str) or value not in options:
        _fail(key, f"must be one of {list(options)}, got {value!r}")
    return value


def _flag(key: str, value) -> bool:
    if not isinstance(value, bool):
        _fail(key, f"expected true or false, got {value!r}")
    return value


def _section(cls, raw: Mapping | None, prefix: str, parsers: dict):
    if raw is not None and not isinstance(raw, Mapping):
        _fail(prefix, f"expected a mapping, got {type(raw).__name__} {raw!r}")
    raw = {} if raw is None else dict(raw)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        _fail(f"{prefix}.{unknown[0]}", f"unknown key; valid keys are {sorted(known)}")
    values = {name: parsers[name](f"{prefix}.{name}", raw[name]) for name in raw}
    return cls(**values)


def parse_config(raw: Mapping | None, prefix: str = "algorithm.arew") -> AReWConfig:
    """Build an :class:`AReWConfig` from a plain mapping (or OmegaConf container), or fail naming the key."""
    if raw is not None and not isinstance(raw, Mapping):
        _fail(prefix, f"expected a mapping, got {type(raw).__name__}")
    raw = {} if raw is None else {k: raw[k] for k in raw}

    def optional_lam(key, value):
        return None if value is None else _number(key, value, low=0.0)

    def optional_end(key, value):
        return None if value is None else _number(key, value, low=0, integer=True)

    def fill(key, value):
        value = _number(key, value, integer=True)
        if value not in (-1, 0, 1):
            _fail(key, f"must be -1, 0 or 1, got {value!r}")
        return value

    def optional_folder(key, value):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            _fail(key, f"expected a folder path or null, got {value!r}")
        return value

    def channels(key, value):
        # YAML 1.1 (OmegaConf) reads a bare `off` as boolean false.
        return _choice(key, "off" if value is False else value, CHANNEL_SETS)

    parsers = {
        "channels": channels,
        "mode": lambda k, v: _choice(k, v, MODES),
        "grouping": lambda k, v: _choice(k, v, GROUPINGS),
        "weighting": lambda k, v: _choice(k, v, WEIGHTINGS),
        "negatives": lambda k, v: _choice(k, v, NEGATIVES),
        "lam": lambda k, v: _number(k, v, low=0.0),
        "lam_as": optional_lam,
        "lam_bt": optional_lam,
        "reward_coef": lambda k, v: _number(k, v),
        "on_invalid": lambda k, v: _choice(k, v, ON_INVALID),
        "dump_dir": optional_folder,
        "schedule": lambda k, v: _section(
            ScheduleConfig,
            v,
            k,
            {
                "start_step": lambda k2, v2: _number(k2, v2, low=0, integer=True),
                "end_step": optional_end,
                "warmup_steps": lambda k2, v2: _number(k2, v2, low=0, integer=True),
            },
        ),
        "noise": lambda k, v: _section(
            NoiseConfig,
            v,
            k,
            {
                "flip_prob": lambda k2, v2: _number(k2, v2, low=0.0, high=1.0),
                "neg_to_pos_prob": lambda k2, v2: _number(k2, v2, low=0.0, high=1.0),
                "seed": lambda k2, v2: _number(k2, v2, low=0, integer=True),
            },
        ),
        "window": lambda k, v: _section(
            WindowConfig,
            v,
            k,
            {
                "keep": lambda k2, v2: _choice(k2, v2, WINDOWS),
                "fraction": lambda k2, v2: _number(k2, v2, low=0.0, high=1.0),
                "fill": fill,
            },
        ),
        "synact": lambda k, v: _section(
            SynActConfig,
            v,
            k,
            {
                "monitor": _flag,
                # YAML 1.1 (OmegaConf) reads a bare `off` as boolean false
                "critiques": lambda k2, v2: _choice(k2, "off" if v2 is False else v2, SYNACT_CRITIQUES),
                "min_rollouts": lambda k2, v2: _number(k2, v2, low=2, integer=True),
            },
        ),
        "quality": lambda k, v: _section(
            QualityConfig,
            v,
            k,
            {
                "ema": lambda k2, v2: _number(k2, v2, low=0.0, high=0.999),
                "chance_band": lambda k2, v2: _number(k2, v2, low=0.0, high=0.5),
                "warn_after_steps": lambda k2, v2: _number(k2, v2, low=1, integer=True),
                "min_decisions": lambda k2, v2: _number(k2, v2, low=1, integer=True),
                "direction": lambda k2, v2: _choice(k2, v2, DIRECTIONS),
            },
        ),
        "adaptive": lambda k, v: _section(
            AdaptiveConfig,
            v,
            k,
            {
                "enabled": _flag,
                "full_at": lambda k2, v2: _number(k2, v2, low=0.5, high=1.0),
                "warmup_steps": lambda k2, v2: _number(k2, v2, low=0, integer=True),
            },
        ),
    }
    config = _section(AReWConfig, raw, prefix, parsers)
    sched = config.schedule
    if sched.end_step is not None and sched.end_step <= sched.start_step:
        _fail(f"{prefix}.schedule.end_step", f"must be > start_step ({sched.start_step}), got {sched.end_step}")
    if config.negatives != "full" and config.weighting != "step_abs_sum":
        _fail(f"{prefix}.negatives", f"{config.negatives!r} needs weighting=step_abs_sum, got {config.weighting!r}")
    if config.grouping == "pooled" and (config.lam_as is not None or config.lam_bt is not None):
        key = "lam_as" if config.lam_as is not None else "lam_bt"
        _fail(f"{prefix}.{key}", "per-channel strengths need grouping=separate (pooled mode uses lam)")
    if config.adaptive.enabled and config.adaptive.full_at <= 0.5:
        _fail(f"{prefix}.adaptive.full_at", f"must be > 0.5 (chance) when adaptive.enabled, got {config.adaptive.full_at!r}")
    if config.adaptive.enabled and config.mode != "reweight":
        _fail(f"{prefix}.adaptive.enabled", f"needs mode=reweight: critique accuracy is not estimated in mode={config.mode!r}")
    return config
