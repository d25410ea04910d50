"""The dashboards page's panel list is generated from ``panels.py``: regenerating it must change nothing."""

from __future__ import annotations

import dataclasses

import pytest

from arew.reporting import panels
from arew.reporting.markdown_blocks import BlockError, markers
from docgen import panel_docs


def test_the_dashboards_page_panel_block_is_what_the_panel_list_generates():
    text = panel_docs.PAGE.read_text()
    start, end = markers(panel_docs.BLOCK)
    assert start in text and end in text
    assert panel_docs.render(text) == text, "docs/guides/dashboards.md's panel list is stale: run `python -m docgen.panel_docs`"


def test_every_panel_and_key_has_its_line():
    lines = panel_docs.panel_lines().splitlines()
    for panel in panels.panels():
        line = next(line for line in lines if line.startswith(f"  - {panel.title}: "))
        assert panel.description in line and all(f"`{key}`" in line for key in panel.keys)
    assert len(lines) == len(panels.SECTIONS) + len(panels.panels()) + 1


def test_a_renamed_panel_makes_the_page_stale(monkeypatch):
    first = panels.SECTIONS[0]
    renamed = dataclasses.replace(first, panels=(dataclasses.replace(first.panels[0], title="Renamed"),) + first.panels[1:])
    monkeypatch.setattr(panel_docs, "SECTIONS", (renamed,) + panels.SECTIONS[1:])
    text = panel_docs.PAGE.read_text()
    assert panel_docs.render(text) != text


def test_a_file_without_the_markers_is_refused(tmp_path):
    target = tmp_path / "README.md"
    target.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="expected one <!-- panels:start -->"):
        panel_docs.main(["--page", str(target)])
    assert target.read_text() == "# no markers\n"
    with pytest.raises(BlockError):
        panel_docs.render(f"{markers(panel_docs.BLOCK)[0]}\n")
