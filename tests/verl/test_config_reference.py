"""arew/configs/base/arew.yaml's documented defaults and docs/reference/configuration.md are what the declarations render."""

from __future__ import annotations

import shutil

import pytest
from omegaconf import OmegaConf

from arew.schema import parse_section
from docgen.config_reference import (
    COMMAND,
    MARKDOWN,
    ROOT,
    SECTIONS,
    YAML,
    drift,
    main,
)


def test_the_generated_files_are_up_to_date():
    stale = drift()
    assert not stale, f"{[str(path) for path in stale]} differ from the settings' declarations; run {COMMAND}"


@pytest.mark.parametrize("key", SECTIONS)
def test_the_yaml_holds_each_sections_defaults(key, monkeypatch):
    for variable in ("AREW_USER_SERVICE", "AREW_USER_SERVER_CMD"):
        monkeypatch.delenv(variable, raising=False)
    raw = OmegaConf.select(OmegaConf.load(ROOT / YAML), key)
    assert parse_section(SECTIONS[key], OmegaConf.to_container(raw, resolve=True), key) == SECTIONS[key]()


def test_an_edited_file_is_reported_and_rewritten(tmp_path):
    for path in (YAML, MARKDOWN):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    text = (tmp_path / YAML).read_text()
    (tmp_path / YAML).write_text(text.replace("  # Critique strength lambda", "  # the strength"))
    (tmp_path / MARKDOWN).write_text("# Configuration\n")
    assert drift(tmp_path) == [YAML, MARKDOWN]
    assert main([], tmp_path) == 1
    assert main(["--write"], tmp_path) == 0 and drift(tmp_path) == []
    assert (tmp_path / YAML).read_text() == text
