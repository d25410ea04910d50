"""One declarative schema for AReW's config sections: parsing, checks that name the full key, documentation.

A section is a frozen dataclass whose fields are declared with :func:`setting` (a default and a
:class:`Setting`: kind, range or choices, one line of documentation, an optional extra rule) or
:func:`subsection`, and whose class attribute ``DOC`` is its own line of documentation.
:func:`parse_section` builds one from an OmegaConf or plain mapping, and the same declarations
render the commented defaults of ``arew/configs/base/arew.yaml`` and the tables of
``docs/reference/configuration.md`` (:mod:`docgen.config_reference` writes both), so
code, YAML and docs cannot drift apart. Environment options (:mod:`arew.envs.options`) are
:class:`Setting` too. This package imports nothing else of arew: ``arew.core`` and ``arew.envs``
both build on it.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import yaml

SCHEMA = "arew.schema"  # the key of a field's declaration in its dataclass metadata
WIDTH = 120  # YAML comment lines are wrapped to this many columns


class ConfigError(ValueError):
    """A config value is invalid; the message starts with the full key."""


@dataclass(frozen=True)
class Setting:
    """One key: its kind (bool, int, float, str, tuple of strings or dict), rules and one line of documentation."""

    kind: type
    doc: str
    choices: tuple = ()
    low: float | None = None  # inclusive bounds
    high: float | None = None
    above: float | None = None  # exclusive lower bound
    nullable: bool = False  # null is allowed (its meaning is in ``doc``)
    rule: Callable[[Any], str | None] | None = None  # says what a value must be when it breaks a rule beyond the above
    yaml: str | None = None  # the YAML written in place of the default (an interpolation such as ${oc.env:...})

    def check(self, key: str, value: Any) -> Any:
        """``value`` as the section holds it (floats for ints, tuples for lists), or raise naming ``key``."""
        if value is None and self.nullable:
            return None
        if value is False and self.kind is str and "off" in self.choices:
            value = "off"  # YAML 1.1 (OmegaConf) reads a bare `off` as false
        given, value = value, _as_kind(self.kind, key, value)
        if self.choices and value not in self.choices:
            raise ConfigError(f"{key}: must be one of {list(self.choices)}, got {given!r}")
        if self.kind in (int, float) and not self._in_range(value):
            raise ConfigError(f"{key}: must be {self.range_text()}, got {given!r}")
        reason = self.rule(value) if self.rule is not None else None
        if reason:
            raise ConfigError(f"{key}: must {reason}, got {given!r}")
        return value

    def _in_range(self, value: float) -> bool:
        return (
            (self.low is None or value >= self.low)
            and (self.above is None or value > self.above)
            and (self.high is None or value <= self.high)
        )

    def range_text(self) -> str:
        bounds = [(">=", self.low), (">", self.above), ("<=", self.high)]
        return " and ".join(f"{sign} {bound:g}" for sign, bound in bounds if bound is not None)

    def yaml_text(self, default: Any) -> str:
        """The default as YAML that this setting reads back as the default: bare where it can be, else quoted."""
        if self.yaml is not None:
            return self.yaml
        bare = default if isinstance(default, str) else json.dumps(default)
        try:
            if self.check("", yaml.safe_load(bare)) == default:
                return bare
        except (ConfigError, yaml.YAMLError):
            pass
        return json.dumps(default)


def _as_kind(kind: type, key: str, value: Any) -> Any:
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if kind is str and isinstance(value, str):
        return value
    is_list = isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if kind is tuple and is_list and value and all(isinstance(item, str) and item for item in value):
        return tuple(value)
    if kind is dict and (value is None or isinstance(value, Mapping)):
        return {k: value[k] for k in value or {}}  # a null mapping is an empty one
    expected = {
        bool: "true or false",
        int: "an integer",
        float: "a finite number",
        str: "a string",
        tuple: "a non-empty list of non-empty strings",
        dict: "a mapping",
    }[kind]
    raise ConfigError(f"{key}: expected {expected}, got {value!r}")


def not_blank(text: str) -> str | None:
    """A rule for names and paths: an empty or all-blank string is a typo, not a value."""
    return None if text.strip() else "not be blank"


def setting(default: Any = MISSING, doc: str = "", *, kind: type | None = None, repr: bool = True, **rules: Any) -> Any:
    """A section field: its default and its :class:`Setting` (of the default's kind unless ``kind`` is given);
    ``repr=False`` keeps a secret out of the section's repr."""
    declared = Setting(kind or type(default), doc, **rules)
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), repr=repr, metadata={SCHEMA: declared})
    return field(default=default, repr=repr, metadata={SCHEMA: declared})


def subsection(section: type) -> Any:
    """A nested section field (its documentation is the section's ``DOC``)."""
    return field(default_factory=section, metadata={SCHEMA: section})


def parse_section(section: type, raw: Any, prefix: str) -> Any:
    """An instance of ``section`` from a mapping (null: every default), or raise naming the full key."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{prefix}: expected a mapping, got {type(raw).__name__} {raw!r}")
    declared = {f.name: _declaration(section, f.name) for f in fields(section)}
    values = {}
    for name in raw:
        if name not in declared:
            raise ConfigError(f"{prefix}.{name}: unknown key; valid keys are {sorted(declared)}")
        spec = declared[name]
        key = f"{prefix}.{name}"
        values[name] = spec.check(key, raw[name]) if isinstance(spec, Setting) else parse_section(spec, raw[name], key)
    return section(**values)


def check_fields(instance: Any, prefix: str = "") -> None:
    """Raise naming ``prefix + name`` unless every declared field of a built section holds a valid value."""
    for f in fields(instance):
        spec = _declaration(type(instance), f.name)
        if isinstance(spec, Setting):
            spec.check(f"{prefix}{f.name}", getattr(instance, f.name))


def flat_settings(section: type) -> dict[str, tuple[Setting, Any]]:
    """Each field of a section without subsections: its :class:`Setting` and its default (``MISSING`` if none)."""
    declared = {}
    for f in fields(section):
        spec = _declaration(section, f.name)
        if not isinstance(spec, Setting):
            raise TypeError(f"{section.__name__}.{f.name} is not a declared setting")
        declared[f.name] = (spec, f.default_factory() if f.default_factory is not MISSING else f.default)
    return declared


def _declaration(section: type, name: str) -> Setting | type | None:
    """Field ``name``'s :class:`Setting` or section; a subclass that only changes its default keeps its base's."""
    for cls in section.__mro__:
        declared = getattr(cls, "__dataclass_fields__", {}).get(name)
        if declared is not None and SCHEMA in declared.metadata:
            return declared.metadata[SCHEMA]
    return None


def yaml_block(section: type, key: str, indent: int = 0) -> list[str]:
    """The section as commented YAML lines: its ``DOC``, ``key:``, then each key's doc and default."""
    pad = " " * indent
    lines = _comment(getattr(section, "DOC", ""), pad) + [f"{pad}{key}:"]
    for f in fields(section):
        spec = _declaration(section, f.name)
        if isinstance(spec, Setting):
            default = f.default_factory() if f.default is MISSING else f.default
            lines += _comment(spec.doc, pad + "  ") + [f"{pad}  {f.name}: {spec.yaml_text(default)}"]
        else:
            lines += yaml_block(spec, f.name, indent + 2)
    return lines


def _comment(text: str, pad: str) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(text, WIDTH, initial_indent=f"{pad}# ", subsequent_indent=f"{pad}# ", break_long_words=False, break_on_hyphens=False)


def markdown_table(section: type, key: str) -> str:
    """The section as a Markdown heading, its ``DOC`` and a table of key, default and meaning."""
    doc = getattr(section, "DOC", "")
    rows = "".join(f"| `{name}` | {default} | {_escape(meaning)} |\n" for name, default, meaning in _rows(section, ""))
    return f"## `{key}`\n\n" + (f"{_escape(doc)}\n\n" if doc else "") + "| key | default | meaning |\n| --- | --- | --- |\n" + rows


def options_table(options: Mapping[str, Setting], defaults: Mapping[str, Any], unknown: str) -> str:
    """A Markdown table of flat options (name, default, meaning); ``unknown`` stands for a default ``defaults`` lacks."""
    rows = "".join(
        f"| `{name}` | {f'`{spec.yaml_text(defaults[name])}`' if name in defaults else _escape(unknown)} | {_escape(spec.doc)} |\n"
        for name, spec in options.items()
    )
    return "| option | default | meaning |\n| --- | --- | --- |\n" + rows


def _rows(section: type, prefix: str):
    for f in fields(section):
        spec = _declaration(section, f.name)
        if isinstance(spec, Setting):
            default = f.default_factory() if f.default is MISSING else f.default
            yield prefix + f.name, f"`{spec.yaml_text(default)}`", spec.doc
        else:
            if getattr(spec, "DOC", ""):
                yield prefix + f.name, "", spec.DOC
            yield from _rows(spec, f"{prefix}{f.name}.")


def _escape(text: str) -> str:
    """``text`` as Markdown shows it as written: its markup characters (``*`` of ``lambda*u``, ``<ch>``) escaped."""
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text.replace("<", "&lt;")
