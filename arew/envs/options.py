"""Environment options (``arew_agent.env_options``): each task declares its own, checked at start-up.

An environment class lists its options in ``OPTIONS`` (name -> :class:`Option`); the default is
the one of its constructor's keyword argument, so it is written once. Tasks with a simulated
user also take the user options of :mod:`arew.envs.users`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    kind: type  # bool, int, float or str
    doc: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    nullable: bool = False  # None is allowed (the task's own default)

    def check(self, key: str, value: Any) -> None:
        if value is None and self.nullable:
            return
        kind_ok = {
            bool: isinstance(value, bool),
            int: isinstance(value, int) and not isinstance(value, bool),
            float: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
            str: isinstance(value, str),
        }[self.kind]
        if not kind_ok:
            raise ValueError(f"{key}: expected a {'finite ' if self.kind is float else ''}{self.kind.__name__}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{key}: must be one of {list(self.choices)}, got {value!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"{key}: must lie in [{self.low}, {self.high}], got {value!r}")


def check_options(env_class, options: Mapping[str, Any], prefix: str, user_options: tuple[str, ...] = ()) -> None:
    """Raise naming ``prefix.key`` for an unknown option or an invalid value; user options are left to the caller."""
    for key, value in options.items():
        if key in user_options:
            continue
        declared = env_class.OPTIONS.get(key)
        if declared is None:
            valid = sorted(env_class.OPTIONS) + sorted(user_options)
            raise ValueError(f"{prefix}.{key}: not an option of {env_class.__name__}; valid options: {valid}")
        declared.check(f"{prefix}.{key}", value)
