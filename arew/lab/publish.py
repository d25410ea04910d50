"""``python -m arew.lab.publish RUN_DIR``: write a default ``arew lab`` run's table into the READMEs.

The published lab numbers are generated, never typed: each README holds its table between
two markers, each on its own line (a marker quoted inside a line is text), and this command replaces exactly the text between them with the run's
``results.md`` (nothing else in the file changes)::

    <!-- lab:default:start -->          arew/lab/README.md: results.md as `arew lab` prints it
    <!-- lab:default:end -->
    <!-- lab:default-summary:start -->  README.md: the same cells, fewer columns
    <!-- lab:default-summary:end -->

A target file without a complete block is an error (so a marker edited away cannot make the
tables drift silently), and so is a run whose ``config.json`` is not the default study
(``--any-config`` publishes it anyway).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict
from pathlib import Path

from arew.lab.config import LabConfig

REPO = Path(__file__).resolve().parents[2]
TARGETS = (REPO / "arew" / "lab" / "README.md", REPO / "README.md")
BLOCKS = ("default", "default-summary")
# columns of the README.md summary, by results.md header (the last one by prefix: its target varies)
SUMMARY_COLUMNS = ("variant", "reward", "AS proxy", "BT proxy", "I_AS (nats)", "oracle reward", "steps to reward")


class PublishError(RuntimeError):
    pass


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def summary_table(results_md: str) -> str:
    """The columns of ``SUMMARY_COLUMNS`` from the full table, cells unchanged."""
    lines = [line for line in results_md.splitlines() if line.strip()]
    if len(lines) < 2:
        raise PublishError("results.md has no table")
    header = _cells(lines[0])
    picks = []
    for name in SUMMARY_COLUMNS:
        matches = [i for i, h in enumerate(header) if h == name or (name == "steps to reward" and h.startswith(name))]
        if len(matches) != 1:
            raise PublishError(f"results.md: column {name!r} not found once in {header}")
        picks.append(matches[0])
    rows = [_cells(line) for line in lines[2:]]
    out = ["| " + " | ".join(header[i] for i in picks) + " |", "|" + "---|" * len(picks)]
    out += ["| " + " | ".join(row[i] for i in picks) + " |" for row in rows]
    return "\n".join(out) + "\n"


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- lab:{name}:start -->", f"<!-- lab:{name}:end -->"


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with the lines between ``name``'s start and end markers replaced by ``content``."""
    return replace_between(text, *_markers(name), content)


def replace_between(text: str, start: str, end: str, content: str) -> str:
    """``text`` with the lines between the one ``start`` line and the one ``end`` line replaced by ``content``."""
    pattern = re.compile(rf"(^{re.escape(start)}[ \t]*\n)(.*?)(^{re.escape(end)}[ \t]*$)", re.M | re.S)
    found = pattern.findall(text)
    starts, ends = (len(re.findall(rf"^{re.escape(m)}[ \t]*$", text, re.M)) for m in (start, end))
    if len(found) != 1 or starts != 1 or ends != 1:
        raise PublishError(f"expected one {start} ... {end} block (each marker on its own line), found {len(found)}")
    return pattern.sub(lambda m: m.group(1) + content + m.group(3), text)


def blocks_for(results_md: str) -> dict[str, str]:
    return {"default": results_md, "default-summary": summary_table(results_md)}


def publish_text(text: str, blocks: dict[str, str]) -> str:
    """Replace every block of ``blocks`` present in ``text``; at least one must be."""
    present = [name for name in blocks if any(re.search(rf"^{re.escape(m)}", text, re.M) for m in _markers(name))]
    if not present:
        names = ", ".join(_markers(name)[0] for name in blocks)
        raise PublishError(f"no lab table markers ({names}) found")
    for name in present:
        text = replace_block(text, name, blocks[name])
    return text


def check_default(run: Path) -> None:
    meta = json.loads((run / "config.json").read_text())["config"]
    default = json.loads(json.dumps(asdict(LabConfig())))
    differing = sorted(k for k in set(meta) | set(default) if meta.get(k) != default.get(k))
    if differing:
        raise PublishError(f"{run} is not the default study (differs in {differing}); pass --any-config to publish it")


def publish(run: Path, targets: tuple[Path, ...] = TARGETS, any_config: bool = False) -> list[Path]:
    """Write ``run``'s tables into ``targets``; every target is checked before any is written."""
    if not any_config:
        check_default(run)
    blocks = blocks_for((run / "results.md").read_text())
    new = {}
    for path in targets:
        try:
            new[path] = publish_text(path.read_text(), blocks)
        except PublishError as error:
            raise PublishError(f"{path}: {error}") from None
    for path, text in new.items():
        path.write_text(text)
    return list(new)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m arew.lab.publish", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an `arew lab` output folder (results.md, config.json)")
    parser.add_argument("--readme", type=Path, action="append", help="target file (repeatable; default: both READMEs)")
    parser.add_argument("--any-config", action="store_true", help="publish a run that is not the default study")
    args = parser.parse_args(argv)
    try:
        written = publish(args.run, tuple(args.readme) if args.readme else TARGETS, args.any_config)
    except PublishError as error:
        raise SystemExit(f"arew.lab.publish: {error}") from None
    for path in written:
        print(f"published {args.run / 'results.md'} into {path}")


if __name__ == "__main__":
    main()
