"""Each critique source's own labels beside those training uses, so that every source is counted and scored.

With a critique source (:mod:`arew.critiques`) an agent loop puts, beside a sample's records
(:mod:`arew.core.records`), each source's labels of the same decisions, in the records' order::

    extra_fields["arew_critique_sources"] = {"rules": [1, 0, -1], "judge": [1, 1, -1]}

(``rules``: the environment's own critiques; a source's "no critique" is 0). :func:`collect_source_labels`
lines them up with the batch's :class:`~arew.core.records.Segments` (its ``sources``); a malformed entry
(not a mapping of lists of -1/0/1 as long as the sample's decisions) loses that sample's source labels
and is counted, never failing the step: these labels only measure, the records are what trains.
:class:`arew.core.quality.SourceScores` scores each source as the training labels are scored, against
the same per-decision advantage estimate, and counts its labels per channel.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from arew.core.records import Segments

SOURCES_KEY = "arew_critique_sources"


def _entry_ok(entry: object, count: int) -> bool:
    if not isinstance(entry, Mapping):
        return False
    for name, values in entry.items():
        if not isinstance(name, str) or not isinstance(values, (list, tuple)) or len(values) != count:
            return False
        if any(not isinstance(v, numbers.Integral) or v not in (-1, 0, 1) for v in values):
            return False
    return True


def collect_source_labels(raw: Sequence[object], segments: Segments) -> tuple[dict[str, torch.Tensor], int]:
    """({source: (K,) labels aligned with ``segments``}, samples whose entry was malformed); absent: 0."""
    if len(raw) != segments.batch_size:
        raise ValueError(f"source labels for {len(raw)} samples, the segments describe {segments.batch_size}")
    counts = segments.count_per_sample.tolist()
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    names = sorted({name for entry in raw if isinstance(entry, Mapping) for name in entry if isinstance(name, str)})
    labels = {name: np.zeros(len(segments.sample), dtype=np.int64) for name in names}
    malformed = 0
    for i, entry in enumerate(raw):
        if entry is None or counts[i] == 0:
            continue
        if not _entry_ok(entry, counts[i]):
            malformed += 1
            continue
        for name, values in entry.items():
            labels[name][offsets[i] : offsets[i + 1]] = values
    return {name: torch.from_numpy(values) for name, values in labels.items()}, malformed
