"""What every browser test of ``arew report`` checks: the page opens clean, and a group has one colour everywhere."""

from __future__ import annotations

import os
from pathlib import Path

PAGE_LIMIT_BYTES = 5_000_000  # the budget for the default lab's page


def artifact(name: str) -> Path:
    """Where a test keeps a file for people to look at: $AREW_TEST_ARTIFACTS, else test-artifacts/ in the repository."""
    folder = Path(os.environ.get("AREW_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def open_report(context, path: Path):
    """The page, opened from file:// and drawn; the list it appends console errors, page errors and requests to."""
    problems: list[str] = []
    page = context.new_page()
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith("file://") else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_function("window.arewReady !== undefined")
    return page, problems


def drawn_colours(page) -> dict[str, dict[str, set[str]]]:
    """Per group, the computed colours of what the page draws for it: its toggle's swatch, chart lines, bands, viewer swatches."""
    return page.evaluate(
        """() => {
        const out = {};
        const add = (group, what, colour) => {
            out[group] = out[group] || {};
            (out[group][what] = out[group][what] || []).push(colour);
        };
        document.querySelectorAll('.group-toggle .swatch').forEach(n => add(n.dataset.group, 'toggle', getComputedStyle(n).backgroundColor));
        document.querySelectorAll('path.mean').forEach(n => add(n.dataset.group, 'mean', getComputedStyle(n).stroke));
        document.querySelectorAll('path.band').forEach(n => add(n.dataset.group, 'band', getComputedStyle(n).fill));
        document.querySelectorAll('#episode-rows .swatch').forEach(n => add(n.dataset.group, 'viewer', getComputedStyle(n).backgroundColor));
        return out;
    }"""
    )


def assert_one_colour_per_group(page, groups: list[str]) -> None:
    """Every group drawn in its own colour, the same on its toggle, every chart line and band, and in the viewer."""
    colours = drawn_colours(page)
    assert sorted(colours) == sorted(groups)
    seen = {}
    for group, kinds in colours.items():
        assert set(kinds) >= {"toggle", "mean"}, f"{group}: drawn as {sorted(kinds)}"
        distinct = {c for values in kinds.values() for c in values}
        assert len(distinct) == 1, f"{group} is drawn in several colours: {kinds}"
        seen[group] = distinct.pop()
    assert len(set(seen.values())) == len(seen), f"two groups share a colour: {seen}"
