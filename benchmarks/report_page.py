"""How heavy and how fast the default lab's report is in Chromium, against the same runs with every episode embedded.

    python benchmarks/report_page.py [--lab DIR] [--loads N] [--publish]

Builds ``arew report`` over a lab's runs (``--lab``: an ``arew lab`` output folder; default: run the
default ``arew lab`` into a temporary folder first, about 14 minutes on 2 cores) twice: as shipped
(episodes thinned to ``EPISODE_BYTES``) and as a baseline with every sampled episode embedded, which
is what the page carried before it was thinned. For each it prints the page's size, the median over
``--loads`` fresh page loads in headless Chromium of the time from navigation to the drawn page
(``window.arewReady``, set by the page's script once every chart and the viewer's list are in), the time a
critique filter takes to redraw the viewer's list and the time to open one episode. ``--publish``
writes the table into docs/reference/benchmarks.md between its markers.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from arew.reporting import report
from arew.reporting.markdown_blocks import replace_block
from arew.reporting.screenshot import browser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:report-page"
FILTER_MS = """() => {
    const select = document.getElementById('f-pattern');
    const t = performance.now();
    select.value = 'both:'; select.dispatchEvent(new Event('input'));
    return performance.now() - t;
}"""
OPEN_MS = """() => {
    const row = document.querySelector('tr.episode');
    const t = performance.now();
    row.click();
    return performance.now() - t;
}"""


def lab_runs(lab: Path) -> list[Path]:
    runs = sorted(p.parent for p in lab.glob("runs/*/seed*/metrics.jsonl"))
    if not runs:
        raise SystemExit(f"{lab}: no runs/<variant>/seed<k>/metrics.jsonl: not an `arew lab` output folder")
    return runs


def measure(path: Path, loads: int) -> dict[str, float]:
    ready, filtering, opening = [], [], []
    with browser() as context:
        for _ in range(loads):
            page = context.new_page()
            page.goto(path.resolve().as_uri())
            page.wait_for_function("window.arewReady !== undefined", timeout=120_000)
            ready.append(page.evaluate("window.arewReady") / 1000)
            filtering.append(page.evaluate(FILTER_MS))
            opening.append(page.evaluate(OPEN_MS))
            page.close()
    return {
        "mb": path.stat().st_size / 1e6,
        "ready_s": statistics.median(ready),
        "filter_ms": statistics.median(filtering),
        "open_ms": statistics.median(opening),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", type=Path, default=None, help="an `arew lab` output folder (default: run the default lab first)")
    parser.add_argument("--loads", type=int, default=3, help="page loads per variant, median reported (default 3)")
    parser.add_argument("--publish", action="store_true", help="write the table into docs/reference/benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        lab = args.lab
        if lab is None:
            lab = Path(scratch) / "lab"
            print("running the default `arew lab` (about 14 minutes on 2 cores) ...", flush=True)
            subprocess.run([sys.executable, "-m", "arew.cli", "lab", "--out", str(lab)], check=True, stdout=subprocess.DEVNULL)
        runs = lab_runs(lab)
        started = time.perf_counter()
        shipped = report.build(runs, Path(scratch) / "report.html", pngs=False)
        build_s = time.perf_counter() - started
        report.EPISODE_BYTES = report.MAX_EPISODES = 10**12  # the baseline: every sampled episode in the page
        baseline = report.build(runs, Path(scratch) / "everything.html", pngs=False)
        episodes = sum(len(r.episodes) for r in report.load_runs(runs))
        rows = {"every episode embedded (baseline)": measure(baseline, args.loads), "as shipped": measure(shipped, args.loads)}
    base = rows["every episode embedded (baseline)"]
    lines = [
        "| page | size (MB) | drawn after (s) | critique filter (ms) | open an episode (ms) | size vs baseline | drawn vs baseline |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['mb']:.1f} | {row['ready_s']:.2f} | {row['filter_ms']:.0f} | {row['open_ms']:.0f} "
            f"| {row['mb'] / base['mb']:.2f} | {row['ready_s'] / base['ready_s']:.2f} |"
        )
    print(f"{len(runs)} runs, {episodes} sampled episodes; building the shipped page took {build_s:.1f} s")
    print("\n".join(lines))
    if args.publish:
        machine = f"{platform.machine()}, {platform.python_version()}, Chromium headless"
        block = "\n".join([
            f"_{len(runs)} runs of the default `arew lab`, {episodes} sampled episodes; median of {args.loads} loads; {machine}; "
            "written by `python benchmarks/report_page.py --publish`_", "", *lines,
        ]) + "\n"  # fmt: skip
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))


if __name__ == "__main__":
    main()
