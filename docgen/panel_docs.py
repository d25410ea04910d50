"""``python -m docgen.panel_docs``: write the dashboard's panel list into docs/guides/dashboards.md.

The list is generated from ``arew.reporting.panels``, never typed: that page holds it between
``<!-- panels:start -->`` and ``<!-- panels:end -->`` (each on its own line), and a test checks that
regenerating it changes nothing, so a renamed or added panel fails a test until this is rerun.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arew.reporting.markdown_blocks import BlockError, replace_block
from arew.reporting.panels import NEEDS_WORDS, ROLLOUT_TABLES, SECTIONS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "dashboards.md"
BLOCK = "panels"  # the page's <!-- panels:start --> ... <!-- panels:end --> (arew.reporting.markdown_blocks)


def panel_lines() -> str:
    """One markdown line per panel (under its section), then the rollout tables."""
    lines = []
    for section in SECTIONS:
        lines.append(f"- **{section.name}**")
        for panel in section.panels:
            keys = ", ".join(f"`{key}`" for key in panel.keys)
            when = "" if panel.needs == "always" else f" _({NEEDS_WORDS[panel.needs]})_"
            lines.append(f"  - {panel.title}: {panel.description} {panel.reading} {keys}{when}")
    lines.append(f"- **Rollouts**: the sampled-episode tables {', '.join(f'`{key}`' for key in ROLLOUT_TABLES)}")
    return "\n".join(lines) + "\n"


def render(text: str) -> str:
    """``text`` (a docs page) with its panel block regenerated."""
    return replace_block(text, BLOCK, panel_lines())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m docgen.panel_docs", description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=PAGE, help="the file to update (default: docs/guides/dashboards.md)")
    args = parser.parse_args(argv)
    try:
        args.page.write_text(render(args.page.read_text()))
    except (BlockError, FileNotFoundError) as error:
        raise SystemExit(f"{args.page}: {error}") from None
    print(f"wrote the panel list into {args.page}")


if __name__ == "__main__":
    main()
