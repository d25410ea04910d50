"""Generated blocks of a Markdown file: the lines between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``.

The published lab tables (:mod:`docgen.lab_publish`), the dashboard's panel list
(:mod:`docgen.panel_docs`), the benchmarks' README tables and the tables ``arew lm-lab --publish PAGE``
writes into a page are written, never typed, into such blocks; this is the one rule for finding and
replacing one, shared by all of them. Each marker stands on its own line (a marker quoted inside a
line is text), and a file without exactly one complete block is an error, so a marker edited away
cannot make a table drift silently.
"""

from __future__ import annotations

import re


class BlockError(ValueError):
    """The text has no complete block of that name, or more than one."""


def markers(name: str) -> tuple[str, str]:
    """The start and end marker lines of block ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def has_block(text: str, name: str) -> bool:
    """Whether either of ``name``'s markers starts a line of ``text`` (the block may still be broken)."""
    return any(re.search(rf"^{re.escape(marker)}", text, re.M) for marker in markers(name))


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with the lines between block ``name``'s start and end lines replaced by ``content``."""
    start, end = markers(name)
    pattern = re.compile(rf"(^{re.escape(start)}[ \t]*\n)(.*?)(^{re.escape(end)}[ \t]*$)", re.M | re.S)
    found = pattern.findall(text)
    starts, ends = (len(re.findall(rf"^{re.escape(m)}[ \t]*$", text, re.M)) for m in (start, end))
    if len(found) != 1 or starts != 1 or ends != 1:
        raise BlockError(f"expected one {start} ... {end} block (each marker on its own line), found {len(found)}")
    return pattern.sub(lambda m: m.group(1) + content + m.group(3), text)
