"""Environment options (``arew_agent.env_options``): each task declares its own, checked at start-up.

An environment class lists its options in ``OPTIONS`` (name -> :class:`Option`, a
:class:`arew.schema.Setting`, the field declaration of every config section); the default is the
one of its constructor's keyword argument, so it is written once. Tasks with a simulated user also
take the user options of :mod:`arew.envs.users`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arew.schema import ConfigError, Setting

Option = Setting  # an environment option is declared like any other key


def check_options(env_class, options: Mapping[str, Any], prefix: str, user_options: tuple[str, ...] = ()) -> None:
    """Raise naming ``prefix.key`` for an unknown option or an invalid value; user options are left to the caller."""
    for key, value in options.items():
        if key in user_options:
            continue
        declared = env_class.OPTIONS.get(key)
        if declared is None:
            valid = sorted(env_class.OPTIONS) + sorted(user_options)
            raise ConfigError(f"{prefix}.{key}: not an option of {env_class.__name__}; valid options: {valid}")
        declared.check(f"{prefix}.{key}", value)
