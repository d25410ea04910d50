"""Rollouts a user can read: a deterministic few episodes per step, turn by turn, as JSONL and a W&B table.

The agent loop stores each episode's transcript (:func:`transcript`: the prompt's last user
message and every decision's text, channel, critique and the reply it got, texts cut at
``arew_rollouts.max_text_chars``) in the sample's ``extra_fields``. The trainer picks
``per_step`` episodes of each training step (``val_per_step`` of each validation) with
:func:`sample_indices`, turns each into one row of the rollout JSONL schema (:func:`build_row`,
with the critique after the transforms and the coefficient each decision got) and appends the
rows to ``<dir>/train.jsonl`` / ``<dir>/val.jsonl``; :func:`table` lays the same rows out for a
W&B Table. Nothing here imports verl.
"""

from __future__ import annotations

import json
import logging
import math
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from arew.core.records import CHANNEL_INDEX, Segments
from arew.core.transforms import turn_index
from arew.envs.rows import json_lines, replaced_whole
from arew.schema import not_blank, parse_section, setting

logger = logging.getLogger(__name__)

SECTION = "arew_rollouts"
TRANSCRIPT_KEY = "arew_transcript"  # the agent loop's extra_fields key
SPLITS = ("train", "val")
DEFAULT_SUBDIR = "rollouts"
RUN_RECORD = "run.json"
"""In the rollout folder: ``{"group": ...}``, the run group (the seeds of one variant) ``arew report`` draws the run in."""


@dataclass(frozen=True)
class RolloutSettings:
    """The ``arew_rollouts`` section; each key is declared (and documented) once, here."""

    DOC: ClassVar[str] = "Readable rollouts (arew.metrics.rollouts): a few episodes per step, turn by turn, as JSONL and W&B tables."

    per_step: int = setting(4, 'Training episodes per step written out (the smallest crc32 of "step:episode"; 0: none)', low=0)
    val_per_step: int = setting(4, "Validation episodes per validation run written out (0: none)", low=0)
    dir: str | None = setting(
        None,
        "Folder of train.jsonl / val.jsonl (null: rollouts/ beside verl's file-logger file VERL_FILE_LOGGER_PATH, else ${trainer.default_local_dir}/rollouts)",
        kind=str,
        nullable=True,
        rule=not_blank,
    )
    wandb: bool = setting(True, "Also log the rows as the W&B tables rollouts/train and rollouts/val when trainer.logger has wandb")
    max_text_chars: int = setting(
        4000,
        "Longest prompt, agent text or environment reply kept per turn, in characters (longer ones are cut, marked)",
        low=1,
    )

    @property
    def enabled(self) -> bool:
        return self.per_step > 0 or self.val_per_step > 0

    @classmethod
    def from_config(cls, raw, prefix: str = SECTION) -> RolloutSettings:
        return parse_section(cls, raw, prefix)

    def folder(self, default_local_dir: str | None) -> Path:
        """``dir``; else ``rollouts/`` beside verl's file-logger file (VERL_FILE_LOGGER_PATH); else under the checkpoint folder."""
        if self.dir is not None:
            return Path(self.dir)
        metrics_file = os.environ.get("VERL_FILE_LOGGER_PATH")
        if metrics_file:
            return Path(metrics_file).resolve().parent / DEFAULT_SUBDIR
        return Path(default_local_dir or ".") / DEFAULT_SUBDIR


def truncate(text: str | None, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters, saying how much was cut."""
    if text is None or len(text) <= limit:
        return text
    marker = f" ...[{len(text)} characters, cut]"
    if len(marker) >= limit:
        return text[:limit]
    return text[: limit - len(marker)] + marker


def last_user_message(messages: Sequence[Mapping[str, Any]] | None) -> str:
    """The content of the last ``user`` message of a chat prompt ('' when there is none)."""
    for message in reversed(list(messages or [])):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, default=str)
    return ""


def transcript(turns: Sequence[Mapping[str, Any]], prompt: str, task: str | None, data_source: str | None, limit: int) -> dict:
    """What the agent loop stores under :data:`TRANSCRIPT_KEY`: the prompt and each decision, texts cut at ``limit``."""
    return {
        "task": task,
        "data_source": None if data_source is None else str(data_source),
        "prompt": truncate(prompt, limit),
        "turns": [
            {
                "agent": truncate(turn["agent"], limit),
                "channel": turn["channel"],
                "critique": int(turn["critique"]),
                "feedback": truncate(turn["feedback"], limit),
                **({"sources": dict(turn["sources"]), "reason": truncate(turn["reason"], limit)} if "sources" in turn else {}),
            }
            for turn in turns
        ],
    }


def sample_indices(names: Sequence[str | None], step: int, count: int) -> list[int]:
    """Positions of the ``count`` episodes with the smallest crc32 of ``f"{step}:{name}"`` (None: padding, skipped).

    Depends on the names and the step only, never on the order the episodes arrived in; a
    different step picks different episodes of the same prompts.
    """
    if count <= 0:
        return []
    keyed = sorted((_sample_key(step, name), name, i) for i, name in enumerate(names) if name is not None)
    return [i for _, _, i in keyed[:count]]


def _sample_key(step: int, name: str) -> int:
    return zlib.crc32(f"{step}:{name}".encode())


class ValidationSample:
    """The ``count`` validation episodes :func:`sample_indices` would pick, offered batch by batch."""

    def __init__(self, step: int, count: int):
        self.step, self.count = step, count
        self._kept: list[tuple[int, str, Any]] = []

    def offer(self, name: str | None, payload: Any) -> None:
        if name is None or self.count <= 0:
            return
        self._kept.append((_sample_key(self.step, name), name, payload))
        if len(self._kept) > 2 * self.count:
            self._trim()

    def _trim(self) -> None:
        self._kept.sort(key=lambda item: item[:2])
        del self._kept[self.count :]

    def payloads(self) -> list[Any]:
        self._trim()
        return [payload for _, _, payload in self._kept]


def turn_numbers(channels: Sequence[str]) -> list[int]:
    """1-based interaction turn of each decision of one episode (:func:`arew.core.transforms.turn_index`'s rule)."""
    n = len(channels)
    if n == 0:
        return []
    positions = torch.arange(n)
    segments = Segments(
        sample=torch.zeros(n, dtype=torch.long),
        start=positions,
        end=positions + 1,
        channel=torch.tensor([CHANNEL_INDEX.get(c, CHANNEL_INDEX["bt"]) for c in channels], dtype=torch.long),
        label=torch.zeros(n, dtype=torch.long),
        batch_size=1,
    )
    return turn_index(segments)[0].tolist()


def decisions_of(sample: torch.Tensor, rows: Sequence[int]) -> list[tuple[int, int]]:
    """[first, last) positions of each row's decisions in a batch's decision order (``Segments.sample``, sorted)."""
    targets = torch.tensor(list(rows), dtype=sample.dtype)
    first = torch.searchsorted(sample, targets, right=False)
    last = torch.searchsorted(sample, targets, right=True)
    return list(zip(first.tolist(), last.tolist()))


def build_row(
    split: str,
    step: int,
    episode: str,
    reward: float,
    stored: Mapping[str, Any] | None,
    numbers: Mapping[str, Any] | None,
    failure: Mapping[str, Any] | None,
    applied: Sequence[int] | None = None,
    coefficients: Sequence[float] | None = None,
) -> dict:
    """One episode as a row of the rollout JSONL schema (``applied``/``coefficient`` null without an advantage stage).

    ``stored`` is the agent loop's :func:`transcript`; an episode without one (an older agent
    loop) gets no turns. When the decisions given do not match the transcript's turns (the
    trainer dropped the sample's records) its turns keep the critiques with null values, and a
    warning says so.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    stored = stored or {}
    turns = list(stored.get("turns") or [])
    if applied is not None and (len(applied) != len(turns) or coefficients is None or len(coefficients) != len(turns)):
        logger.warning(
            "rollout row of %s: %d turns but %d decisions in the advantage stage; its applied/coefficient are null",
            episode, len(turns), len(applied),
        )  # fmt: skip
        applied = coefficients = None
    numbers_out = {str(k): _finite(v) for k, v in (numbers or {}).items() if _is_number(v)}
    rows = []
    for i, (turn, number) in enumerate(zip(turns, turn_numbers([t.get("channel") for t in turns]))):
        rows.append(
            {
                "index": i,
                "turn": int(number),
                "channel": turn.get("channel"),
                "agent": turn.get("agent", ""),
                "feedback": turn.get("feedback"),
                "critique": int(turn.get("critique", 0)),
                "applied": None if applied is None else int(applied[i]),
                "coefficient": None if coefficients is None else _finite(coefficients[i]),
                "sources": turn.get("sources"),  # each critique source's label ("rules": the environment's); null: no source
                "reason": turn.get("reason"),
            }
        )
    return {
        "split": split,
        "step": int(step),
        "episode": episode,
        "task": stored.get("task"),
        "data_source": stored.get("data_source"),
        "reward": _finite(reward),
        "failed": None if not failure else {"reason": str(failure.get("reason")), "error": str(failure.get("error"))},
        "prompt": stored.get("prompt", ""),
        "numbers": numbers_out,
        "turns": rows,
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> float | None:
    """A float for JSON; None for NaN/inf (JSON has no such numbers)."""
    value = float(value)
    return value if math.isfinite(value) else None


def write_run_record(folder: Path, group: str) -> None:
    """Write :data:`RUN_RECORD` into the rollout folder ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / RUN_RECORD).write_text(json.dumps({"group": group}) + "\n")


def append_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append one JSON line per row (the folder is made on first use)."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(utf8_json(row) + "\n" for row in rows))


def drop_rows_from(path: Path, step: int) -> int:
    """Remove the rows of ``step`` and later from a rollout table (and a line a kill cut short); the rows dropped.

    A run resumed from its checkpoint at ``step`` trains that step again: the rows an interrupted run wrote for it
    (or later) describe episodes nobody trained on, and would stand beside the new ones in the report.
    """
    if not path.exists():
        return 0
    rows, dropped = json_lines(path)
    kept = [row for row in rows if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] < step]
    dropped += len(rows) - len(kept)
    if dropped:
        with replaced_whole(path) as partial:
            partial.write_text("".join(utf8_json(row) + "\n" for row in kept), encoding="utf-8")
    return dropped


# what str.splitlines() (and most line readers) end a line at, besides "\n": JSON leaves them raw in its strings
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def utf8_json(value: Any) -> str:
    """JSON text that encodes as UTF-8 and holds no line break, whatever strings ``value`` holds: a code point UTF-8
    cannot encode (a lone surrogate from some server's reply) makes the text ASCII-escaped, and the line
    separators JSON keeps raw (U+0085, U+2028, U+2029, which a model may write) are escaped; both read back the
    same, and a JSON-lines file stays one row per line for any reader."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text.translate(_LINE_BREAKS)


TABLE_COLUMNS = ("step", "episode", "task", "reward", "failure", "critiques", "coef_pos", "coef_neg", "transcript", "prompt")
"""The W&B table's fixed columns; the episode's numbers (decisions, failed, proxy_*, ...) follow, sorted."""


def _sign(value: int | None) -> str:
    return "." if value is None else f"{value:+d}" if value else "0"


def critique_line(row: Mapping[str, Any]) -> str:
    """One token per decision, e.g. ``AS+1 BT-1>0``: channel, critique, and after ``>`` the critique after the transforms where it changed."""
    parts = []
    for turn in row["turns"]:
        text = f"{str(turn['channel']).upper()}{_sign(turn['critique'])}"
        if turn["applied"] is not None and turn["applied"] != turn["critique"]:
            text += f">{_sign(turn['applied'])}"
        parts.append(text)
    return " ".join(parts)


def transcript_text(row: Mapping[str, Any]) -> str:
    """The episode turn by turn, each decision headed by its turn, channel and signed critique (and coefficient)."""
    lines = []  # the prompt has its own column
    for turn in row["turns"]:
        head = f"[{turn['index']}] turn {turn['turn']} {str(turn['channel']).upper()} critique {_sign(turn['critique'])}"
        if turn["applied"] is not None:
            head += f" applied {_sign(turn['applied'])} coef {turn['coefficient']:+.4g}"
        lines += [head, f"agent: {turn['agent']}"]
        if turn.get("sources"):
            labels = " ".join(f"{name} {_sign(label)}" for name, label in turn["sources"].items())
            lines.append(f"critiques: {labels}" + (f" ({turn['reason']})" if turn.get("reason") else ""))
        if turn["feedback"] is not None:
            lines.append(f"env: {turn['feedback']}")
        lines.append("")
    if row["failed"]:
        lines.append(f"[failed in {row['failed']['reason']}] {row['failed']['error']}")
    return "\n".join(lines).rstrip()


def table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """(columns, data) of a W&B Table: one row per episode, its transcript as text, its numbers as columns."""
    number_keys = sorted({key for row in rows for key in row["numbers"]})
    columns = [*TABLE_COLUMNS, *(f"numbers/{key}" if key in TABLE_COLUMNS else key for key in number_keys)]
    data = []
    for row in rows:
        coefficients = [t["coefficient"] for t in row["turns"] if t["coefficient"] is not None]
        data.append(
            [
                row["step"],
                row["episode"],
                row["task"],
                row["reward"],
                row["failed"]["reason"] if row["failed"] else "",
                critique_line(row),
                sum(c for c in coefficients if c > 0) if coefficients else None,
                sum(c for c in coefficients if c < 0) if coefficients else None,
                transcript_text(row),
                row["prompt"],
                *[row["numbers"].get(key) for key in number_keys],
            ]
        )
    return columns, data
