"""``python -m docgen.recipe_resources``: write the table of every paper task's resources into docs/guides/recipes.md.

The table comes from the dry run of each recipe (:func:`arew.verl_plugin.dry_run.table_runs`, every task and
algorithm composed and checked as ``recipes/train.sh --dry-run`` does), never typed: the page holds it between
``<!-- dry-run:resources:start -->`` and ``<!-- dry-run:resources:end -->``, and tests/verl/test_dry_run.py checks
that regenerating it changes nothing.
"""

from __future__ import annotations

from pathlib import Path

from arew.reporting.markdown_blocks import replace_block
from arew.verl_plugin.dry_run import resource_table, table_runs

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "recipes.md"
BLOCK = "dry-run:resources"


def page_text(runs) -> str:
    """The recipes page with ``runs``' resource table in its block."""
    return replace_block(PAGE.read_text(), BLOCK, resource_table(runs) + "\n")


def main() -> None:
    PAGE.write_text(page_text(table_runs()))
    print(f"wrote the resource table into {PAGE.name}")


if __name__ == "__main__":
    main()
