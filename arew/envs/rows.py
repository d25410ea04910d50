"""verl dataset rows of the tasks and their parquet splits, built the same way for every task."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from arew.envs.base import ActiveReasoningEnv

AGENT_NAME = "arew_agent"
ABILITY = "active_reasoning"
SPLIT_ORDER = ("train", "validation", "test")


@dataclass(frozen=True)
class TaskVariant:
    """A named task variant; its rows are tagged ``arew/<name>`` (verl groups validation metrics by it)."""

    name: str

    @property
    def data_source(self) -> str:
        return f"arew/{self.name}"


def verl_rows(
    splits: dict[str, list[dict[str, Any]]],
    env_cls: type[ActiveReasoningEnv],
    data_source: str,
    ground_truth: Callable[[dict[str, Any]], str],
) -> dict[str, list[dict[str, Any]]]:
    """verl rows per split from ``extra_info`` dicts, each all ``env_cls.from_row`` needs."""
    return {
        split: [
            {
                "data_source": data_source,
                "prompt": env_cls.from_row(info, info["seed"]).initial_messages(),
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": ground_truth(info)},
                "extra_info": info,
                "agent_name": AGENT_NAME,
            }
            for info in infos
        ]
        for split, infos in splits.items()
    }


def write_splits(rows: dict[str, list[dict[str, Any]]], out_dir: str | Path) -> dict[str, Path]:
    """Write ``<split>.parquet`` per split; return the paths in :data:`SPLIT_ORDER`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, split_rows in rows.items():
        paths[split] = out / f"{split}.parquet"
        with replaced_whole(paths[split]) as partial:
            pd.DataFrame(split_rows).to_parquet(partial, index=False)
    return {split: paths[split] for split in SPLIT_ORDER}


@contextlib.contextmanager
def replaced_whole(path: Path) -> Iterator[Path]:
    """A file to write in ``path``'s place: written beside it, then renamed over it when the block ends without
    an error, so an interrupted write never leaves a torn file under ``path`` (the old one stays, or none)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        yield partial
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def read_json_record(path: Path) -> Any:
    """The JSON value of a record written whole, or None when it is missing, unreadable or torn: the caller then
    rebuilds what the record describes, as if it had never been written."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: not JSON, or bytes that are not UTF-8
        return None


def json_lines(path: Path) -> tuple[list[Any], int]:
    """The JSON values of a JSON-lines file, and how many of its lines are not JSON (the line a kill cut short,
    bytes that are not UTF-8): those are skipped, for the caller to count or say. Lines end at "\n" only:
    ``str.splitlines()`` also splits at U+2028 and U+0085, which a JSON string may hold raw."""
    values, broken = [], 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").split("\n"):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line))
        except ValueError:
            broken += 1
    return values, broken


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a split written by :func:`write_splits`, as plain Python (parquet gives numpy arrays)."""
    return [_plain(row) for row in pd.read_parquet(path).to_dict(orient="records")]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:
        return [_plain(item) for item in value]
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", None) == 0 else value
