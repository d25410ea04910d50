"""``arew report``: one self-contained HTML page (and a PNG per chart) from trainer, lab or eval runs.

A run is a folder holding verl's ``file`` logger JSONL (``metrics.jsonl``) and the rollout JSONL
of the contract (``rollouts/train.jsonl``, ``rollouts/val.jsonl``), or an ``arew eval`` output
(``episodes.jsonl``), or the metrics file itself. Runs are grouped (seeds of one variant): a chart
draws each group as the mean over its runs with a band from their lowest to their highest value,
one colour per group on every chart, in the PNGs and in the trajectory viewer. The charts are the
dashboard's panels (:data:`arew.reporting.panels.SECTIONS`); the trajectory viewer reads one
episode decision by decision. Nothing is fetched: the page's script and styles are inline and the
data sits in it as JSON, which the script only ever writes into the page as text (model output is
untrusted). The page stays light: values are kept to 5 significant digits and the embedded
episodes to :data:`EPISODE_BYTES`, sampled evenly over each run's steps.
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

import numpy as np

from arew.envs.rows import json_lines
from arew.metrics.rollouts import DEFAULT_SUBDIR, RUN_RECORD, utf8_json
from arew.reporting.panels import NEEDS_WORDS, SECTIONS, matching

METRICS_FILE = "metrics.jsonl"
ROLLOUT_FILES = ("rollouts/train.jsonl", "rollouts/val.jsonl")
EVAL_FILE = "episodes.jsonl"
RUN_FILE = f"{DEFAULT_SUBDIR}/{RUN_RECORD}"
"""Written by the run (the lab: its variant; the trainer: its W&B group, else its experiment name)."""
MAX_EPISODES = 4000
"""Episodes embedded per page at most, shared evenly by the runs (each run's kept evenly spaced)."""
EPISODE_BYTES = 2_500_000
"""JSON bytes of embedded episodes per page at most (at the runs' mean episode size), so the page opens at once."""
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
DASHES = ("", "6 3", "2 2", "8 3 2 3")
"""Group i: colour PALETTE[i % 10], dash DASHES[i // 10] (SVG dash arrays; more groups than 40 repeat)."""
GROUP_BY = ("auto", "name", "none")
SEED_SUFFIX = re.compile(r"(?:[/_.-]|^)(?:seed[_-]?|s)\d+$", re.IGNORECASE)
"""A run name's trailing seed part (``/seed0``, ``-seed_2``, ``_s3``): removed to name the run's group."""
TURN_FIELDS = ("index", "turn", "channel", "agent", "feedback", "critique", "applied", "coefficient")
"""The embedded turns are lists in this order (the page rebuilds the objects): a third of the bytes of keyed ones."""
SIGNIFICANT = 5
MAX_ABS_VALUE = 1e100
"""Metric values beyond this magnitude are counted and left out: the charts' axes need a finite span (±1e308 overflows it)."""
MAX_KEY_CHARS = 200
"""Metric and episode-number keys longer than this are counted and left out (no logger writes one; a hostile file can)."""
MAX_TEXT_CHARS = 8000
"""A turn's agent text or feedback is embedded up to this many characters (the rest replaced by a note of its length)."""
MAX_TURNS = 400
"""Turns embedded per episode at most (the rest counted)."""


@dataclass
class Run:
    name: str
    folder: Path
    group: str = ""
    recorded_group: str | None = None  # from RUN_FILE
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # key -> [(step, value)]
    episodes: list[dict] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)  # what went wrong -> how often
    undefined: set[str] = field(default_factory=set)  # keys logged as null or NaN (not measured that step)

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
        entries, broken = json_lines(path)
    except OSError as error:
        run.problem(f"{path.name}: unreadable ({type(error).__name__})")
        return []
    if broken:
        run.problem(f"{path.name}: invalid JSON line", broken)
    objects = []
    for entry in entries:
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
            if len(str(key)) > MAX_KEY_CHARS:
                run.problem(f"{path.name}: metric key longer than {MAX_KEY_CHARS} characters")
                continue
            if value is None or (isinstance(value, float) and math.isnan(value)):
                run.undefined.add(str(key))  # not measured this step (an undefined correlation, no estimate): the trainer's own gap
                continue
            number = _number(value)
            if number is None:
                run.problem(f"{path.name}: non-numeric or infinite value")
                continue
            if abs(number) > MAX_ABS_VALUE:
                run.problem(f"{path.name}: value beyond ±{MAX_ABS_VALUE:g}")
                continue
            run.series.setdefault(str(key), []).append((int(step), number))


def _text(value, run: Run) -> str:
    """A text as embedded: at most :data:`MAX_TEXT_CHARS` characters, a longer one cut with a note of its length."""
    text = str(value)
    if len(text) <= MAX_TEXT_CHARS:
        return text
    run.problem(f"turn text longer than {MAX_TEXT_CHARS} characters, cut")
    return text[:MAX_TEXT_CHARS] + f" [... {len(text) - MAX_TEXT_CHARS} more characters not shown]"


def _turn(turn: dict, index: int, run: Run) -> dict:
    def integer(value):
        return int(value) if _number(value) is not None and abs(value) < 2**53 else None

    coefficient = turn.get("coefficient")
    return {
        "index": index if integer(turn.get("index")) is None else integer(turn.get("index")),
        "turn": integer(turn.get("turn")),
        "channel": str(turn.get("channel") or ""),
        "agent": "" if turn.get("agent") is None else _text(turn.get("agent"), run),
        "feedback": None if turn.get("feedback") is None else _text(turn.get("feedback"), run),
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
    if not isinstance(numbers, dict):
        numbers = {}
    if any(len(str(key)) > MAX_KEY_CHARS for key in numbers):
        run.problem(f"episode number key longer than {MAX_KEY_CHARS} characters")
        numbers = {key: value for key, value in numbers.items() if len(str(key)) <= MAX_KEY_CHARS}
    turns = [t for t in turns if isinstance(t, dict)]
    if len(turns) > MAX_TURNS:
        run.problem(f"episode of more than {MAX_TURNS} turns, the rest not shown")
        turns = turns[:MAX_TURNS]
    failed = entry.get("failed") if isinstance(entry.get("failed"), dict) else None
    step = _number(entry.get("step"))
    return {
        "run": run.name,
        "split": str(entry.get("split") or split)[:MAX_KEY_CHARS],
        "step": int(step) if step is not None else 0,
        "episode": str(entry.get("episode", entry.get("name", "")))[:MAX_KEY_CHARS],
        "task": str(entry.get("task") or "")[:MAX_KEY_CHARS],
        "reward": reward,
        "failed": {str(k)[:MAX_KEY_CHARS]: _text(v, run) for k, v in list(failed.items())[:8]} if failed else None,
        "prompt": str(entry.get("prompt") or "")[:4000],
        "numbers": {str(k): _number(v) for k, v in numbers.items()},
        "turns": [_turn(t, i, run) for i, t in enumerate(turns)],
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
            run.recorded_group = read_group(folder / RUN_FILE, run)
        runs.append(run)
    return runs


def read_group(path: Path, run: Run) -> str | None:
    """The group the run recorded for itself, if any (a broken file is counted, not fatal)."""
    if not path.exists():
        return None
    try:
        group = json.loads(path.read_text(encoding="utf-8")).get("group")
    except (OSError, ValueError, AttributeError):
        group = None
    if not isinstance(group, str) or not group.strip():
        run.problem(f"{RUN_FILE}: no group string")
        return None
    return group.strip()


def assign_groups(runs: Sequence[Run], by: str = "auto", pattern: str | None = None) -> list[str]:
    """Set each run's group and return the groups in order of first appearance.

    ``auto``: the group the run recorded (:data:`RUN_FILE`), else its name without a trailing seed part;
    ``name``: the latter only; ``none``: every run alone. ``pattern`` (a regex searched in the run name)
    wins over ``by``: the group is its first capture group (the whole match without one); a run it does
    not match is alone.
    """
    if by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, got {by!r}")
    regex = re.compile(pattern) if pattern else None
    for run in runs:
        if regex is not None:
            found = regex.search(run.name)
            run.group = (found.group(1) if found and regex.groups else found.group(0) if found else "") or run.name
        elif by == "none":
            run.group = run.name
        elif by == "auto" and run.recorded_group:
            run.group = run.recorded_group
        else:  # a name that is only its seed part (one lab run: "seed0") takes its folder's parent
            run.group = SEED_SUFFIX.sub("", run.name) or SEED_SUFFIX.sub("", run.folder.resolve().parent.name) or run.name
    return list(dict.fromkeys(run.group for run in runs))


def group_styles(groups: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each group's colour and dash, the same on the page and in the PNGs."""
    return {g: {"colour": PALETTE[i % len(PALETTE)], "dash": DASHES[i // len(PALETTE) % len(DASHES)]} for i, g in enumerate(groups)}


def smoothing_window(runs: Sequence[Run]) -> int:
    """The default moving-average window: about a 25th of the longest run (1 for short runs)."""
    longest = max((len(points) for run in runs for points in run.series.values()), default=0)
    return max(1, round(longest / 25))


def _significant(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}")


def _panel_series(panel, keys: list[str], run: Run) -> list[dict]:
    """The run's points of the panel's keys; a ``shares`` panel's counts become shares of their per-step sum."""
    series = {key: dict(run.series[key]) for key in keys if run.series.get(key)}
    if panel.shares and series:
        totals: dict[int, float] = {}
        for points in series.values():
            for step, value in points.items():
                totals[step] = totals.get(step, 0.0) + value
        series = {key: {step: value / totals[step] for step, value in points.items() if totals[step] > 0} for key, points in series.items()}
    out = []
    for key, points in series.items():
        steps = sorted(points)
        if steps:
            out.append({"run": run.name, "key": key, "steps": steps, "values": [_significant(points[s]) for s in steps]})
    return out


def chart_data(runs: Sequence[Run]) -> list[dict]:
    """Per section, the panels with their series (``panels``), those some run logged without a value at any step
    (``undefined``: e.g. a correlation over constant rewards) and those no run logged at all (``missing``)."""
    logged = set().union(*(run.series for run in runs)) if runs else set()
    undefined = set().union(*(run.undefined for run in runs)) if runs else set()
    sections = []
    for section in SECTIONS:
        drawn, without, missing = [], [], []
        for panel in section.panels:
            keys = [key for pattern in panel.keys for key in matching(pattern, logged)]
            series = [s for run in runs for s in _panel_series(panel, keys, run)]
            if series:
                drawn.append(
                    {"title": panel.title, "description": panel.description, "reading": panel.reading,
                     "shares": panel.shares, "keys": keys, "series": series}
                )  # fmt: skip
            elif any(matching(pattern, undefined) for pattern in panel.keys):
                without.append({"title": panel.title, "keys": list(panel.keys)})
            else:
                missing.append({"title": panel.title, "keys": list(panel.keys), "needs": NEEDS_WORDS[panel.needs]})
        sections.append({"name": section.name, "panels": drawn, "undefined": without, "missing": missing})
    return sections


def key_label(key: str, shares: bool) -> str:
    """A small chart's title inside a panel: the critique sign of a count key, else the key."""
    if shares:
        return {"pos": "+1", "zero": "0", "neg": "-1"}.get(key.rsplit("/", 1)[-1], key) + " share"
    return key


def grouped(panel: dict, key: str, groups: dict[str, str], window: int) -> dict[str, tuple[np.ndarray, ...]]:
    """Per group: steps, mean, lowest and highest over its runs of the key's moving averages (the PNGs')."""
    by_group: dict[str, dict[int, list[float]]] = {}
    for series in panel["series"]:
        if series["key"] != key:
            continue
        smooth = moving_average(series["values"], window)
        steps = by_group.setdefault(groups[series["run"]], {})
        for step, value in zip(series["steps"], smooth):
            steps.setdefault(step, []).append(value)
    out = {}
    for group, steps in by_group.items():
        order = sorted(steps)
        values = [np.asarray(steps[s]) for s in order]
        out[group] = (np.asarray(order), np.array([v.mean() for v in values]), np.array([v.min() for v in values]), np.array([v.max() for v in values]))
    return out


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` points (shorter at the start); the page's smoothing is the same."""
    x = np.asarray(values, dtype=float)
    sums = np.cumsum(np.insert(x, 0, 0.0))
    index = np.arange(1, len(x) + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def masked_moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """:func:`moving_average` over the points that are not nan; nan where a window holds none (a gap, not a zero)."""
    x = np.asarray(values, dtype=float)
    missing = np.isnan(x)
    if not missing.any():
        return moving_average(x, window)
    with np.errstate(invalid="ignore"):
        return moving_average(np.where(missing, 0.0, x), window) / moving_average(~missing, window)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "panel"


def write_pngs(sections: Sequence[dict], runs: Sequence[Run], folder: Path) -> list[Path]:
    """One matplotlib PNG per drawn panel: per key a small chart, per group its mean and band, the page's colours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    groups = {run.name: run.group or run.name for run in runs}
    styles = group_styles(list(dict.fromkeys(groups.values())))
    window = smoothing_window(runs)
    written = []
    for section in sections:
        for panel in section["panels"]:
            fig, axes = plt.subplots(1, len(panel["keys"]), figsize=(3.4 * len(panel["keys"]) + 2.6, 3.6), squeeze=False)
            for ax, key in zip(axes[0], panel["keys"]):
                for group, (steps, mean, low, high) in grouped(panel, key, groups, window).items():
                    style = styles[group]
                    dash = tuple(float(x) for x in style["dash"].split()) if style["dash"] else None
                    (line,) = ax.plot(steps, mean, color=style["colour"], label=group, linewidth=1.6)
                    if dash:
                        line.set_dashes(dash)
                    ax.fill_between(steps, low, high, color=style["colour"], alpha=0.18, linewidth=0)
                if len(panel["keys"]) > 1:
                    ax.set_title(key_label(key, panel["shares"]), fontsize=9)
                ax.set_xlabel("step")
                ax.grid(alpha=0.3)
            axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
            smoothing = f" (moving average over {window} steps)" if window > 1 else ""
            fig.suptitle(f"{section['name']}: {panel['title']}{smoothing}", fontsize=10)
            fig.tight_layout()
            path = folder / f"{_slug(section['name'])}--{_slug(panel['title'])}.png"
            fig.savefig(path, dpi=90)
            plt.close(fig)
            written.append(path)
    return written


def _script_json(value) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` survive literally."""
    text = utf8_json(value)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def compact_episode(episode: dict) -> dict:
    """The episode as embedded: turns as lists in :data:`TURN_FIELDS` order."""
    return {**episode, "turns": [[turn[f] for f in TURN_FIELDS] for turn in episode["turns"]]}


def sample_episodes(runs: Sequence[Run]) -> list[list[dict]]:
    """Each run's embedded episodes: an even share of :data:`EPISODE_BYTES` (and :data:`MAX_EPISODES`), evenly spaced."""
    compacted = [[compact_episode(e) for e in run.episodes] for run in runs]
    count = sum(map(len, compacted))
    if not count:
        return compacted
    mean_bytes = sum(len(json.dumps(e)) for episodes in compacted for e in episodes) / count
    cap = max(1, min(MAX_EPISODES, int(EPISODE_BYTES / mean_bytes)) // max(len(runs), 1))
    return [_thin(episodes, cap) for episodes in compacted]


def render(
    runs: Sequence[Run],
    title: str = "AReW report",
    group_by: str = "auto",
    group_pattern: str | None = None,
    sections: list[dict] | None = None,
) -> str:
    """The page's HTML: the template with the data embedded as JSON (``sections``: :func:`chart_data` of ``runs``,
    when the caller already has it)."""
    groups = assign_groups(runs, group_by, group_pattern)
    styles = group_styles(groups)
    kept = sample_episodes(runs)
    data = {
        "title": title,
        "groups": [{"name": g, **styles[g], "runs": [r.name for r in runs if r.group == g]} for g in groups],
        "runs": [
            {"name": run.name, "group": run.group, "problems": run.problems, "episodes": len(run.episodes), "shown": len(k)}
            for run, k in zip(runs, kept)
        ],
        "smoothing": smoothing_window(runs),
        "sections": chart_data(runs) if sections is None else sections,
        "turn_fields": list(TURN_FIELDS),
        "episodes": [episode for run_episodes in kept for episode in run_episodes],
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


def build(
    paths: Sequence[str | Path],
    out: str | Path,
    pngs: bool = True,
    stderr=sys.stderr,
    group_by: str = "auto",
    group_pattern: str | None = None,
) -> Path:
    """Write the report for ``paths`` to ``out`` (and its PNGs to ``<out stem>_png/``); returns ``out``."""
    out = Path(out)
    runs = load_runs(paths)
    for run in runs:
        for what, count in sorted(run.problems.items()):
            print(f"arew report: {run.name}: {what} (x{count})", file=stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = chart_data(runs)  # one pass over the series for the page and the PNGs
    out.write_text(render(runs, group_by=group_by, group_pattern=group_pattern, sections=sections), encoding="utf-8")
    if pngs:
        write_pngs(sections, runs, out.with_name(f"{out.stem}_png"))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="run folders (metrics.jsonl, rollouts/*.jsonl, episodes.jsonl) or metrics files")
    parser.add_argument("--out", default="report.html", help="HTML file to write (default: report.html); PNGs go to <stem>_png/")
    parser.add_argument(
        "--group-by",
        choices=GROUP_BY,
        default="auto",
        help="auto (default): the group each run recorded (the lab's variant; the trainer's W&B group, else its experiment "
        "name), else the run's name without a trailing seed part (runs/x/seed0 -> runs/x); name: that name rule only; "
        "none: every run alone",
    )
    parser.add_argument(
        "--group-pattern",
        default=None,
        metavar="REGEX",
        help="group runs by a regex searched in their names (the first capture group, or the whole match); overrides --group-by",
    )


def main(args: argparse.Namespace) -> None:
    if args.group_pattern is not None:
        try:
            re.compile(args.group_pattern)
        except re.error as error:
            raise SystemExit(f"arew report: --group-pattern {args.group_pattern!r} is not a regex: {error}") from None
    path = build(args.runs, args.out, group_by=args.group_by, group_pattern=args.group_pattern)
    print(f"arew report: {path}")
