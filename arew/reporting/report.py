"""``arew report``: one self-contained HTML page (and a PNG per chart) from trainer, lab or eval runs.

A run is a folder holding verl's ``file`` logger JSONL (``metrics.jsonl``) and the rollout JSONL
of the contract (``rollouts/train.jsonl``, ``rollouts/val.jsonl``), or an ``arew eval`` output
(``episodes.jsonl``), or the metrics file itself. The charts are the dashboard's panels
(:data:`arew.reporting.panels.SECTIONS`) with every run overlaid; the trajectory viewer lists the
episodes. Nothing is fetched: the page's script and styles are inline and the data sits in
it as JSON, which the script only ever writes into the page as text (model output is untrusted).
Bad input (a broken JSON line, a missing file, a non-numeric value) is counted, shown in the page
and on stderr, and skipped; a null or NaN metric is a value the trainer did not measure that step
(an undefined correlation) and is skipped without a count.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from arew.reporting.panels import SECTIONS, matching

METRICS_FILE = "metrics.jsonl"
ROLLOUT_FILES = ("rollouts/train.jsonl", "rollouts/val.jsonl")
EVAL_FILE = "episodes.jsonl"
MAX_EPISODES = 4000
"""Episodes embedded per page at most, shared evenly by the runs (each run's kept evenly spaced), to keep
the page loadable; the page says how many of each run it shows."""


@dataclass
class Run:
    name: str
    folder: Path
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # key -> [(step, value)]
    episodes: list[dict] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)  # what went wrong -> how often

    def problem(self, what: str, count: int = 1) -> None:
        self.problems[what] = self.problems.get(what, 0) + count


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _jsonl(path: Path, run: Run) -> list[dict]:
    """The file's JSON objects; broken lines (a run cut off mid-write) are counted and skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        run.problem(f"{path.name}: unreadable ({type(error).__name__})")
        return []
    objects = []
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            run.problem(f"{path.name}: invalid JSON line")
            continue
        if isinstance(entry, dict):
            objects.append(entry)
        else:
            run.problem(f"{path.name}: line is not a JSON object")
    return objects


def read_metrics(path: Path, run: Run) -> None:
    """verl's file logger lines ``{"step": n, "data": {...}}`` into ``run.series``."""
    for entry in _jsonl(path, run):
        step, data = entry.get("step"), entry.get("data")
        if _number(step) is None or not isinstance(data, dict):
            run.problem(f"{path.name}: line without a numeric step and a data object")
            continue
        for key, value in data.items():
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue  # not measured this step (an undefined correlation, no estimate): the trainer's own gap
            number = _number(value)
            if number is None:
                run.problem(f"{path.name}: non-numeric or infinite value")
                continue
            run.series.setdefault(str(key), []).append((int(step), number))


def _turn(turn: dict, index: int) -> dict:
    def integer(value):
        return int(value) if _number(value) is not None else None

    coefficient = turn.get("coefficient")
    return {
        "index": index if integer(turn.get("index")) is None else integer(turn.get("index")),
        "turn": integer(turn.get("turn")),
        "channel": str(turn.get("channel") or ""),
        "agent": "" if turn.get("agent") is None else str(turn.get("agent")),
        "feedback": None if turn.get("feedback") is None else str(turn.get("feedback")),
        "critique": integer(turn.get("critique")) or 0,
        "applied": integer(turn.get("applied")),
        "coefficient": _number(coefficient) if coefficient is not None else None,
    }


def normalise_episode(entry: dict, run: Run, split: str) -> dict | None:
    """One episode in the contract's schema (eval records too: ``name``/``info`` for ``episode``/``numbers``)."""
    turns = entry.get("turns")
    if not isinstance(turns, list):
        run.problem("episode without a turns list")
        return None
    reward = _number(entry.get("reward"))
    if reward is None:
        run.problem("episode with a non-numeric reward")
    numbers = entry.get("numbers", entry.get("info")) or {}
    step = _number(entry.get("step"))
    return {
        "run": run.name,
        "split": str(entry.get("split") or split),
        "step": int(step) if step is not None else 0,
        "episode": str(entry.get("episode", entry.get("name", ""))),
        "task": str(entry.get("task") or ""),
        "reward": reward,
        "failed": entry.get("failed") if isinstance(entry.get("failed"), dict) else None,
        "prompt": str(entry.get("prompt") or "")[:4000],
        "numbers": {str(k): _number(v) for k, v in numbers.items()} if isinstance(numbers, dict) else {},
        "turns": [_turn(t, i) for i, t in enumerate(turns) if isinstance(t, dict)],
    }


def read_episodes(path: Path, run: Run, split: str) -> None:
    for entry in _jsonl(path, run):
        episode = normalise_episode(entry, run, split)
        if episode is not None:
            run.episodes.append(episode)


def _names(folders: Sequence[Path]) -> list[str]:
    """The shortest trailing path parts that tell the runs apart (``grpo-as/seed0``)."""
    parts = [f.resolve().parts for f in folders]
    for depth in range(1, max((len(p) for p in parts), default=1) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{name} ({i})" for i, name in enumerate(names)]


def load_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run named on the command line; a missing path is a run with a problem, not an error."""
    folders, files = [], []
    for path in map(Path, paths):
        if path.is_file():
            folders.append(path.parent)
            files.append(path)
        else:
            folders.append(path)
            files.append(None)
    runs = []
    for name, folder, file in zip(_names(folders), folders, files):
        run = Run(name, folder)
        if not folder.exists():
            run.problem("run folder or file does not exist")
        elif file is not None and file.name == EVAL_FILE:
            read_episodes(file, run, "eval")
        else:
            metrics = file if file is not None else folder / METRICS_FILE
            found = False
            if metrics.exists():
                read_metrics(metrics, run)
                found = True
            for name_ in ROLLOUT_FILES:
                if (folder / name_).exists():
                    read_episodes(folder / name_, run, Path(name_).stem)
                    found = True
            if file is None and (folder / EVAL_FILE).exists():
                read_episodes(folder / EVAL_FILE, run, "eval")
                found = True
            if not found:
                run.problem(f"no {METRICS_FILE}, rollouts/*.jsonl or {EVAL_FILE} in the run folder")
        runs.append(run)
    return runs


def chart_data(runs: Sequence[Run]) -> list[dict]:
    """Per section, the panels with their series (``drawn``) and the titles no run logged (``missing``)."""
    logged = set().union(*(run.series for run in runs)) if runs else set()
    sections = []
    for section in SECTIONS:
        drawn, missing = [], []
        for panel in section.panels:
            keys = [key for pattern in panel.keys for key in matching(pattern, logged)]
            series = [
                {"run": run.name, "key": key, "points": sorted(run.series[key])}
                for run in runs
                for key in keys
                if run.series.get(key)
            ]
            if series:
                drawn.append({"title": panel.title, "description": panel.description, "keys": keys, "series": series})
            else:
                missing.append({"title": panel.title, "keys": list(panel.keys), "needs": panel.needs})
        sections.append({"name": section.name, "panels": drawn, "missing": missing})
    return sections


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "panel"


def write_pngs(sections: Sequence[dict], runs: Sequence[Run], folder: Path) -> list[Path]:
    """One matplotlib PNG per drawn panel (same series as the page); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    colours = {run.name: f"C{i % 10}" for i, run in enumerate(runs)}
    styles = ("-", "--", ":", "-.")
    written = []
    for section in sections:
        for panel in section["panels"]:
            fig, ax = plt.subplots(figsize=(6, 3.6))
            for series in panel["series"]:
                steps, values = zip(*series["points"])
                style = styles[panel["keys"].index(series["key"]) % len(styles)]
                label = series["run"] if len(panel["keys"]) == 1 else f"{series['run']}: {series['key']}"
                ax.plot(steps, values, style, color=colours[series["run"]], marker=".", label=label)
            ax.set_title(f"{section['name']}: {panel['title']}", fontsize=10)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            path = folder / f"{_slug(section['name'])}--{_slug(panel['title'])}.png"
            fig.savefig(path, dpi=90)
            plt.close(fig)
            written.append(path)
    return written


def _script_json(value) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` survive literally."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render(runs: Sequence[Run], title: str = "AReW report") -> str:
    """The page's HTML: the template with the data embedded as JSON."""
    cap = MAX_EPISODES // max(len(runs), 1)
    kept = [_thin(run.episodes, cap) for run in runs]
    episodes = [episode for run_episodes in kept for episode in run_episodes]
    data = {
        "title": title,
        "runs": [
            {"name": run.name, "problems": run.problems, "episodes": len(run.episodes), "shown": len(k)}
            for run, k in zip(runs, kept)
        ],
        "sections": chart_data(runs),
        "episodes": episodes,
    }
    template = resources.files("arew.reporting").joinpath("report_template.html").read_text(encoding="utf-8")
    return template.replace("__AREW_TITLE__", _html_text(title)).replace("__AREW_DATA__", _script_json(data))


def _thin(episodes: list[dict], cap: int) -> list[dict]:
    """At most ``cap`` of a run's episodes, evenly spaced, so every step range stays represented."""
    if len(episodes) <= cap:
        return episodes
    return [episodes[int(i)] for i in sorted({round(j * (len(episodes) - 1) / max(cap - 1, 1)) for j in range(cap)})]


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def build(paths: Sequence[str | Path], out: str | Path, pngs: bool = True, stderr=sys.stderr) -> Path:
    """Write the report for ``paths`` to ``out`` (and its PNGs to ``<out stem>_png/``); returns ``out``."""
    out = Path(out)
    runs = load_runs(paths)
    for run in runs:
        for what, count in sorted(run.problems.items()):
            print(f"arew report: {run.name}: {what} (x{count})", file=stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(runs), encoding="utf-8")
    if pngs:
        write_pngs(chart_data(runs), runs, out.with_name(f"{out.stem}_png"))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="run folders (metrics.jsonl, rollouts/*.jsonl, episodes.jsonl) or metrics files")
    parser.add_argument("--out", default="report.html", help="HTML file to write (default: report.html); PNGs go to <stem>_png/")


def main(args: argparse.Namespace) -> None:
    path = build(args.runs, args.out)
    print(f"arew report: {path}")
