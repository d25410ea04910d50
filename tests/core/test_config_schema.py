"""The declarative config schema (arew.schema): parsing, errors that name the full key, the rendered YAML and Markdown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import yaml
from omegaconf import OmegaConf

from arew.schema import (
    ConfigError,
    Setting,
    markdown_table,
    not_blank,
    parse_section,
    setting,
    subsection,
    yaml_block,
)


@dataclass(frozen=True)
class Inner:
    DOC: ClassVar[str] = "A nested section"

    rate: float = setting(0.5, "Share of *all* steps", low=0, high=1)
    mode: str = setting("off", "off | on", choices=("off", "on"))


@dataclass(frozen=True)
class Outer:
    DOC: ClassVar[str] = "The test section"

    steps: int = setting(3, "Steps <n>", low=1)
    timeout: float | None = setting(10.0, "Seconds (null: none)", above=0, nullable=True)
    stop: tuple[str, ...] = setting(("</a>",), "Stop strings")
    options: dict = setting({}, "Free options")
    folder: str | None = setting(None, "A folder", kind=str, nullable=True, rule=not_blank)
    env: str = setting("x", "From the environment", yaml="${oc.env:X,x}")
    inner: Inner = subsection(Inner)


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"steps": 0}, "sec.steps: must be >= 1, got 0"),
        ({"steps": 2.0}, "sec.steps: expected an integer, got 2.0"),
        ({"steps": True}, "sec.steps: expected an integer, got True"),
        ({"timeout": 0}, "sec.timeout: must be > 0, got 0"),
        ({"timeout": float("inf")}, "sec.timeout: expected a finite number, got inf"),
        ({"stop": []}, "sec.stop: expected a non-empty list of non-empty strings, got []"),
        ({"stop": ["a", ""]}, "sec.stop: expected a non-empty list"),
        ({"options": 5}, "sec.options: expected a mapping, got 5"),
        ({"folder": " "}, "sec.folder: must not be blank, got ' '"),
        ({"inner": {"rate": 2}}, "sec.inner.rate: must be >= 0 and <= 1, got 2"),
        ({"inner": {"mode": "maybe"}}, "sec.inner.mode: must be one of ['off', 'on'], got 'maybe'"),
        ({"inner": {"rat": 1}}, "sec.inner.rat: unknown key; valid keys are ['mode', 'rate']"),
        ({"inner": [1]}, "sec.inner: expected a mapping, got list [1]"),
        ("x", "sec: expected a mapping, got str 'x'"),
    ],
)
def test_invalid_values_fail_naming_the_full_key(raw, message):
    with pytest.raises(ConfigError) as error:
        parse_section(Outer, raw, "sec")
    assert str(error.value).startswith(message)


def test_values_are_held_in_their_kind():
    parsed = parse_section(Outer, OmegaConf.create({"timeout": 3, "stop": ["a", "b"], "options": {"k": 1}, "inner": {"mode": False}}), "sec")
    assert parsed.timeout == 3.0 and isinstance(parsed.timeout, float)
    assert parsed.stop == ("a", "b") and parsed.options == {"k": 1}
    assert parsed.inner.mode == "off"  # YAML 1.1 reads a bare `off` as false
    assert parse_section(Outer, None, "sec") == Outer()
    assert parse_section(Outer, {"timeout": None, "options": None}, "sec") == Outer(timeout=None)  # a null mapping is an empty one


def test_the_rendered_yaml_reads_back_as_the_defaults():
    lines = yaml_block(Outer, "sec", indent=2)
    assert lines[:2] == ["  # The test section", "  sec:"]
    assert "    env: ${oc.env:X,x}" in lines and "    stop: [\"</a>\"]" in lines and "    inner:" in lines
    document = yaml.safe_load("\n".join(line for line in lines if "env:" not in line))
    assert parse_section(Outer, document["sec"], "sec") == Outer()


def test_strings_yaml_would_misread_are_quoted():
    assert Setting(str, "").yaml_text("null") == '"null"'
    assert Setting(str, "").yaml_text("a: b") == '"a: b"'
    assert Setting(str, "").yaml_text("--flag 1") == "--flag 1"
    assert Setting(str, "", choices=("off", "on")).yaml_text("off") == "off"  # read back as false, then as "off"


def test_the_markdown_table_escapes_markup():
    table = markdown_table(Outer, "sec")
    assert table.startswith("## `sec`\n\nThe test section\n\n| key | default | meaning |\n")
    assert "| `steps` | `3` | Steps &lt;n> |" in table
    assert "| `inner` |  | A nested section |" in table
    assert r"| `inner.rate` | `0.5` | Share of \*all\* steps |" in table
    assert r"| `inner.mode` | `off` | off \| on |" in table
