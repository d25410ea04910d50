"""How often tau2's offline customer misreads what an agent message asks of the phone, per category of message.

    python benchmarks/customer_reading.py [--publish] [--show]

Plays every message of the phrase battery (:mod:`arew_tau2.customer.battery`: plain, indirect and polite requests,
lists, a misspelled word, long explanations, negations, sarcasm, actions the phone does not have, other
languages, statements that ask for nothing, questions about the phone's state, a statement and a request, quoted
speech, hedged requests, sequenced steps, British and American wording, noise, contractions) through :func:`arew_tau2.customer.reading.requests` and counts a
misreading when the (kind, feature) pairs it reads differ from what the battery says the message asks for.
Per category: messages, misreadings and their rate, and how many misreadings are *paid*: a statement (a message
that asks for nothing) read as a request, which the customer carries out and the critiques may credit. ``--show``
prints each misreading; ``--publish`` writes the table into docs/reference/benchmarks.md between its markers.
No LLM customer is measured here (none is at hand offline); with a served model, ``arew_tau2.customer.llm``
reads the same messages through its tool calls.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from arew.reporting.markdown_blocks import replace_block
from arew_tau2.customer.battery import BATTERY, battery_size
from arew_tau2.customer.reading import requests

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:customer-reading"


def misreadings() -> dict[str, list[tuple[str, tuple, tuple]]]:
    """Per category, the (message, expected, read) of each message read otherwise than the battery says."""
    out: dict[str, list[tuple[str, tuple, tuple]]] = {}
    for category, entries in BATTERY.items():
        out[category] = []
        for message, expected in entries:
            read = tuple(requests(message))
            if read != tuple(expected):
                out[category].append((message, tuple(expected), read))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publish", action="store_true", help="write the table into docs/reference/benchmarks.md")
    parser.add_argument("--show", action="store_true", help="print every misreading")
    args = parser.parse_args()
    started = time.perf_counter()
    found = misreadings()
    seconds = time.perf_counter() - started
    lines = ["| category | messages | misread | rate | paid (a statement acted on) |", "|---|---|---|---|---|"]
    for category, entries in BATTERY.items():
        wrong = found[category]
        paid = sum(not expected and bool(read) for _, expected, read in wrong)
        lines.append(f"| {category} | {len(entries)} | {len(wrong)} | {len(wrong) / len(entries):.0%} | {paid} |")
    total = sum(len(wrong) for wrong in found.values())
    lines.append(f"| all | {battery_size()} | {total} | {total / battery_size():.0%} | "
                 f"{sum(not e and bool(r) for wrong in found.values() for _, e, r in wrong)} |")  # fmt: skip
    print("\n".join(lines))
    if args.show:
        for category, wrong in found.items():
            for message, expected, read in wrong:
                print(f"  {category}: {message!r}\n      expected {list(expected)}, read {list(read)}")
    if args.publish:
        block = "\n".join([f"_{battery_size()} messages, {seconds:.1f} s; written by `python benchmarks/customer_reading.py --publish`_", "", *lines]) + "\n"
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))


if __name__ == "__main__":
    main()
