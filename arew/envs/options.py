"""Environment options (``arew_agent.env_options``): each task declares its own, checked at start-up.

An environment class lists its options in ``OPTIONS`` (name -> :class:`Option`, a
:class:`arew.schema.Setting`, the field declaration of every config section); the default is the
one of its constructor's keyword argument, so it is written once. Tasks with a simulated user also
take the user options of :mod:`arew.envs.users`. A component configured by a declared config
section (the LLM user's and customer's clients) takes that section's fields as flat options
``prefix + field`` through :class:`PrefixedOptions`. ``docs/reference/configuration.md`` lists
every task's options, generated from these declarations (:mod:`docgen.config_reference`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from arew.schema import ConfigError, Setting, flat_settings

Option = Setting  # an environment option is declared like any other key


def check_options(env_class, options: Mapping[str, Any], prefix: str, user_options: Collection[str] = ()) -> None:
    """Raise naming ``prefix.key`` for an unknown option or an invalid value; user options are left to the caller."""
    for key, value in options.items():
        if key in user_options:
            continue
        declared = env_class.OPTIONS.get(key)
        if declared is None:
            valid = sorted(env_class.OPTIONS) + sorted(user_options)
            raise ConfigError(f"{prefix}.{key}: not an option of {env_class.__name__}; valid options: {valid}")
        declared.check(f"{prefix}.{key}", value)


class PrefixedOptions:
    """A config section declared with :mod:`arew.schema` (a flat frozen dataclass) as environment
    options named ``prefix + field``: ``options`` maps each to the field's :class:`Setting` (kind,
    range, choices, nullability, documentation), ``defaults`` to the field's default, and
    :meth:`build` makes the section from such options with the declarations' own checks."""

    def __init__(self, section: type, prefix: str):
        self.section = section
        self.prefix = prefix
        declared = flat_settings(section)
        self.options: dict[str, Option] = {prefix + name: spec for name, (spec, _) in declared.items()}
        self.defaults: dict[str, Any] = {prefix + name: default for name, (_, default) in declared.items()}

    def build(self, options: Mapping[str, Any], at: str = "") -> Any:
        """The section from ``options`` (the fields they leave out keep their defaults), each value
        checked and coerced by its declaration (an int for a float field is that float). An invalid
        value raises :class:`~arew.schema.ConfigError` naming ``at.<option>`` (without ``at``: the
        option alone); an option that is not one of the section's raises ``TypeError``."""
        unknown = sorted(key for key in options if key not in self.options)
        if unknown:
            raise TypeError(f"unknown options {unknown} of {self.section.__name__}; known: {list(self.options)}")

        def name(key: str) -> str:
            return f"{at}.{key}" if at else key

        values = {key[len(self.prefix) :]: self.options[key].check(name(key), value) for key, value in options.items()}
        try:
            return self.section(**values)
        except ConfigError as error:  # a rule over several fields, named by the section's own check
            if not at:
                raise
            raise ConfigError(name(str(error))) from None
