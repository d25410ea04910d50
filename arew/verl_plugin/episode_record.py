"""The record the agent loop hands the trainer about one sample, in verl's ``extra_fields``: declared once, read once.

The agent loop (:mod:`arew.verl_plugin.agent_loop`) writes an :class:`EpisodeRecord` with
:meth:`EpisodeRecord.extra_fields`; verl carries the dict through its TransferQueue; the trainer reads each
sample's back with :meth:`EpisodeRecord.read`, once. The fields the trainer reads itself are type-checked there:
one of the wrong type reads as absent and is named in :attr:`EpisodeRecord.malformed` (the trainer counts them in
``arew/record/malformed_fields``), so a sample never crashes the step or corrupts its batch. The fields the method
core reads are handed to it as they came (its readers check them whole and apply ``algorithm.arew.on_invalid``:
:func:`arew.core.collect_segments`, :func:`arew.core.synact.collect_decision_keys`,
:func:`arew.core.sources.collect_source_labels`, :func:`arew.metrics.staleness.decision_staleness_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from arew.core.records import RECORDS_KEY
from arew.core.sources import SOURCES_KEY
from arew.core.synact import KEYS_KEY
from arew.metrics.rollouts import TRANSCRIPT_KEY
from arew.metrics.staleness import VERSIONS_KEY

EPISODE_NAME_KEY = "arew_episode"
EPISODE_INFO_KEY = "reward_extra_info"  # verl's own key: it logs these numbers in validation
FAILURE_KEY = "arew_failure"
# the extra_fields key of each field, and the type its value has (None: the method core's reader checks it)
KEYS = {
    "name": (EPISODE_NAME_KEY, str),  # the episode's stable name (row, session): what groups and seeds it
    "turns": (RECORDS_KEY, None),  # the critique records (arew.core.records)
    "decision_keys": (KEYS_KEY, None),  # each decision's state and action key (arew.core.synact)
    "versions": (VERSIONS_KEY, None),  # the weight versions each decision was generated with (arew.metrics.staleness)
    "sources": (SOURCES_KEY, None),  # the critique sources' labels beside the rules' (arew.core.sources)
    "info": (EPISODE_INFO_KEY, dict),  # the episode's numbers (its env's proxies, its timings)
    "failure": (FAILURE_KEY, dict),  # why the episode failed ({"reason", "error"}); absent when it did not
    "transcript": (TRANSCRIPT_KEY, dict),  # the readable transcript for the rollout tables (arew.metrics.rollouts)
}


@dataclass(frozen=True)
class EpisodeRecord:
    """One sample's AReW fields; every one may be absent (None): verl's padding samples have none."""

    name: str | None = None
    turns: Any = None
    decision_keys: Any = None
    versions: Any = None
    sources: Any = None
    info: dict | None = None
    failure: dict | None = None
    transcript: dict | None = None
    malformed: tuple[str, ...] = field(default=(), compare=False)
    """The fields present with a value of the wrong type (read as absent)."""

    @classmethod
    def read(cls, extra_fields: Any) -> EpisodeRecord:
        """A sample's record from its ``extra_fields`` (verl may wrap it: ``.data``); not a dict: no fields."""
        extra_fields = getattr(extra_fields, "data", extra_fields)
        if not isinstance(extra_fields, dict):
            return cls()
        values, malformed = {}, []
        for name, (key, kind) in KEYS.items():
            value = extra_fields.get(key)
            if value is not None and kind is not None and not isinstance(value, kind):
                malformed.append(name)
                # a failure that does not read still marks the episode failed: it trains nothing
                value = {"reason": "malformed", "error": f"{FAILURE_KEY} is a {type(value).__name__}"} if name == "failure" else None
            values[name] = value
        return cls(**values, malformed=tuple(malformed))

    def extra_fields(self) -> dict[str, Any]:
        """The record as ``extra_fields`` entries, absent fields left out."""
        return {KEYS[f.name][0]: getattr(self, f.name) for f in fields(self) if f.name in KEYS and getattr(self, f.name) is not None}

    @property
    def failed(self) -> bool:
        return self.failure is not None
