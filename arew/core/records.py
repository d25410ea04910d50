"""Per-turn critique records: the contract between the rollout side and the trainer.

An agent loop describes every assistant decision of one trajectory in the sample's
``extra_fields`` under the key :data:`RECORDS_KEY`, as one dict of four equal-length lists::

    extra_fields["arew_turns"] = {
        "start":   [int, ...],   # first token of the decision, offset into response_ids
        "end":     [int, ...],   # one past its last token (half-open span [start, end))
        "channel": [str, ...],   # "as" (action selection) or "bt" (belief tracking)
        "label":   [int, ...],   # directional critique z_t in {-1, 0, +1}
    }

Offsets index the *response* (the same axis as ``response_mask``), spans are listed in
increasing order and never overlap, and each lies inside the sample's response. A span may
include environment tokens (``response_mask == 0``); those are never reweighted. A sample
without the key has no critiqued decisions (its advantages stay as the base estimator made
them). The dict has exactly these four keys; numbers may be Python or NumPy scalars (a
``bool`` is Python's integer 0 or 1 and is read as such). :func:`collect_segments` enforces all
of this and either raises :class:`CritiqueRecordError` naming the sample or, with
``on_invalid="drop"``, drops that sample's records and counts it; no other error escapes it.
"""

from __future__ import annotations

import numbers
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np
import torch

RECORDS_KEY = "arew_turns"
CHANNELS = ("as", "bt")
CHANNEL_INDEX = {name: i for i, name in enumerate(CHANNELS)}
_FIELDS = ("start", "end", "channel", "label")
_FIELD_SET = frozenset(_FIELDS)
_CHANNEL_SET = frozenset(CHANNELS)
_GET_FIELDS = itemgetter(*_FIELDS)
# The fast path reads a channel from its first letter: the names are ASCII, of one length, with distinct first letters.
_NAME_WIDTH = len(CHANNELS[0])
_CHANNEL_OF_LETTER = np.zeros(128, dtype=np.int64)
_CHANNEL_OF_LETTER[[ord(name[0]) for name in CHANNELS]] = np.arange(len(CHANNELS))


class CritiqueRecordError(ValueError):
    """A sample's critique records break the contract in this module's docstring."""


@dataclass(frozen=True)
class Segments:
    """All decisions of a batch, flattened and sorted by (sample, start).

    ``rank`` is the decision's position within its trajectory and ``count`` the number of
    decisions of that trajectory, which the window transforms need.
    """

    sample: torch.Tensor  # (K,) long
    start: torch.Tensor  # (K,) long
    end: torch.Tensor  # (K,) long
    channel: torch.Tensor  # (K,) long, index into CHANNELS
    label: torch.Tensor  # (K,) long in {-1, 0, 1}
    batch_size: int
    dropped_samples: int = 0
    samples_without_records: int = 0
    # (B,) each sample's place in the order critique noise is drawn in (its sorted noise key); None: batch order
    noise_order: torch.Tensor | None = None
    # each critique source's own (K,) labels, "rules" the environment's (arew.core.sources); None: no source
    sources: dict[str, torch.Tensor] | None = None

    @property
    def rank(self) -> torch.Tensor:
        first = torch.zeros(self.batch_size, dtype=torch.long)
        counts = self.count_per_sample
        first[1:] = torch.cumsum(counts, 0)[:-1]
        return torch.arange(len(self.sample)) - first.index_select(0, self.sample)

    @property
    def count_per_sample(self) -> torch.Tensor:
        return torch.bincount(self.sample, minlength=self.batch_size)

    @property
    def count(self) -> torch.Tensor:
        return self.count_per_sample.index_select(0, self.sample)


def _sample_error(record: object) -> str | None:
    """Why one sample's record is malformed, or None; cheap checks that need Python types."""
    if type(record) is not dict and not isinstance(record, Mapping):  # (the type test skips a slow ABC check)
        return f"expected a dict with keys {_FIELDS}, got {type(record).__name__}"
    if record.keys() != _FIELD_SET:
        missing = [k for k in _FIELDS if k not in record]
        if missing:
            return f"missing keys {missing}"
        unknown_keys = sorted(map(str, set(record) - _FIELD_SET))
        return f"unknown keys {unknown_keys}; a record has exactly {list(_FIELDS)}"
    lengths = set()
    for key in _FIELDS:
        value = record[key]
        if type(value) is not list and (isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__")):
            return f"'{key}' must be a list, got {type(value).__name__}"
        lengths.add(len(value))
    if len(lengths) != 1:
        return f"lists have different lengths {sorted(lengths)}"
    try:
        known = _CHANNEL_SET.issuperset(record["channel"])
    except TypeError:  # an unhashable entry
        known = False
    if not known:
        unknown = {repr(c) for c in record["channel"] if not isinstance(c, str) or c not in CHANNEL_INDEX}
        return f"unknown channel(s) {sorted(unknown)}; expected one of {CHANNELS}"
    return None


def _flatten(kept: list[tuple[int, Mapping]]):
    """(sample, channel, fields) tensors for the kept samples, ``fields`` holding the starts,
    ends and labels as three rows of floats; None if there are none.

    The numbers go through ``array("d")``, which takes exactly what a float can hold and is
    several times faster than ``torch.tensor`` on a list; a nested list or a string raises.
    """
    if not kept:
        return None
    flat: dict[str, list] = {k: [] for k in ("sample", *_FIELDS)}
    for i, record in kept:
        flat["sample"] += [i] * len(record["start"])
        for key in _FIELDS:
            flat[key].extend(record[key])
    fields = torch.frombuffer(array("d", flat["start"] + flat["end"] + flat["label"]), dtype=torch.float64)
    sample = torch.frombuffer(array("q", flat["sample"]), dtype=torch.int64)
    channel = torch.frombuffer(array("q", map(CHANNEL_INDEX.__getitem__, flat["channel"])), dtype=torch.int64)
    return sample, channel, fields.view(3, -1)


def _non_numeric(record: Mapping) -> bool:
    """True unless every start/end/label is a real number a float can hold (the rare, slow path)."""
    for key in ("start", "end", "label"):
        for value in record[key]:
            if not isinstance(value, numbers.Real):
                return True
            try:
                float(value)
            except OverflowError:
                return True
    return False


def _fast_segments(records: Sequence[object], lengths: torch.Tensor, batch_size: int, noise_order) -> Segments | None:
    """The batch's :class:`Segments` when every record is None or a well-formed plain record; None otherwise.

    The common case, checked for the whole batch at once: every record a ``dict`` with the four
    keys, every field a ``list``, equal lengths, channels exactly the strings of
    :data:`CHANNELS`, numbers that ``array("q")`` takes (integers: Python's, NumPy's, bools) and
    every element check passing. Such a batch is exactly one the per-record path below accepts
    without a drop, and it gives the same tensors. Anything else returns None and the batch
    goes through the per-record path, which finds the offending sample and words the error.
    """
    present = [i for i, record in enumerate(records) if record is not None]
    kept = [records[i] for i in present]
    if set(map(type, kept)) - {dict} or set(map(len, kept)) - {len(_FIELDS)}:
        return None
    try:
        columns = list(map(_GET_FIELDS, kept))  # four keys, all found: exactly _FIELDS
    except KeyError:
        return None
    starts, ends, channels, labels = zip(*columns) if columns else ((), (), (), ())
    if set(map(type, chain(starts, ends, channels, labels))) - {list}:
        return None
    counts = list(map(len, starts))
    if counts != list(map(len, ends)) or counts != list(map(len, channels)) or counts != list(map(len, labels)):
        return None
    flat_channel = list(chain.from_iterable(channels))
    try:
        if not _CHANNEL_SET.issuperset(flat_channel) or set(map(type, flat_channel)) - {str}:
            return None
    except TypeError:  # an unhashable entry
        return None
    decisions = len(flat_channel)
    if decisions == 0:
        return None
    values = list(chain.from_iterable(starts))
    values += chain.from_iterable(ends)
    values += chain.from_iterable(labels)
    try:
        fields = torch.frombuffer(array("q", values), dtype=torch.int64).view(3, -1)
    except (TypeError, OverflowError):  # floats, huge integers, non-numbers: the per-record path decides
        return None
    start, end, label = fields
    # every entry is exactly one of the CHANNELS strings: equally long, the first letter says which
    letters = np.frombuffer("".join(flat_channel).encode("ascii"), dtype=np.uint8)[::_NAME_WIDTH]
    channel = torch.from_numpy(_CHANNEL_OF_LETTER[letters])
    sample = torch.from_numpy(np.repeat(np.array(present, dtype=np.int64), counts))  # (torch's repeat_interleave is slow)
    in_range = (start >= 0) & (end > start) & (end <= lengths.index_select(0, sample))
    label_ok = (label >= -1) & (label <= 1)
    ordered = (sample[1:] != sample[:-1]) | (start[1:] >= end[:-1])
    if not (bool(in_range.all()) and bool(label_ok.all()) and bool(ordered.all())):
        return None
    return Segments(sample, start, end, channel, label, batch_size, 0, batch_size - len(present), noise_order)


def collect_segments(
    records: Sequence[object],
    response_lengths: torch.Tensor | Sequence[int],
    sample_names: Sequence[str] | None = None,
    on_invalid: str = "raise",
    noise_keys: Sequence[str] | None = None,
) -> Segments:
    """Validate the batch's records and flatten them into :class:`Segments`.

    ``records[i]`` is sample i's value under :data:`RECORDS_KEY` (None when absent).
    ``sample_names`` (for example TransferQueue keys) make error messages point at the sample.
    ``noise_keys`` (stable per-sample names) fix the order critique noise is drawn in, so that
    the same samples get the same noise however the batch was ordered (a resumed run's batch
    arrives in another order than the uninterrupted run's).
    """
    if on_invalid not in ("raise", "drop"):
        raise ValueError(f"on_invalid must be 'raise' or 'drop', got {on_invalid!r}")
    lengths = torch.as_tensor(response_lengths, dtype=torch.long)
    batch_size = len(records)
    if lengths.shape != (batch_size,):
        raise ValueError(f"response_lengths has shape {tuple(lengths.shape)}, expected ({batch_size},)")
    names = list(sample_names) if sample_names is not None else [str(i) for i in range(batch_size)]
    noise_order = None
    if noise_keys is not None:
        if len(noise_keys) != batch_size:
            raise ValueError(f"noise_keys has {len(noise_keys)} entries, expected {batch_size}")
        noise_order = torch.empty(batch_size, dtype=torch.long)
        noise_order[sorted(range(batch_size), key=lambda i: str(noise_keys[i]))] = torch.arange(batch_size)

    fast = _fast_segments(records, lengths, batch_size, noise_order)
    if fast is not None:
        return fast

    dropped = 0
    missing = 0

    def reject(i: int, reason: str) -> None:
        nonlocal dropped
        if on_invalid == "raise":
            raise CritiqueRecordError(f"critique records of sample {names[i]!r} (row {i}): {reason}")
        dropped += 1

    # One pass of cheap structural checks, gathering flat Python lists; one tensor per column.
    kept: list[tuple[int, Mapping]] = []
    for i, record in enumerate(records):
        if record is None:
            missing += 1
            continue
        reason = _sample_error(record)
        if reason is not None:
            reject(i, reason)
        elif len(record["start"]):
            kept.append((i, record))
    try:
        columns = _flatten(kept)
    except (TypeError, ValueError, OverflowError):
        # Rare path: find the samples with non-numeric values, then flatten the rest.
        numeric = []
        for i, record in kept:
            if _non_numeric(record):
                reject(i, "non-numeric start/end/label (a number, not a list or string, that a float can hold)")
            else:
                numeric.append((i, record))
        kept = numeric
        columns = _flatten(kept)
    if columns is None:
        empty = torch.zeros(0, dtype=torch.long)
        return Segments(empty, empty, empty, empty, empty, batch_size, dropped, missing, noise_order)
    sample, channel, fields = columns
    start_f, end_f, label_f = fields

    # Element checks, vectorised over all decisions of the batch.
    # (infinities count as integral, NaN does not, so each gets its own message below)
    integral = ((fields.frac() == 0) | fields.isinf()).all(dim=0)
    finite = fields.isfinite().all(dim=0)
    start, end = start_f.nan_to_num(0).long(), end_f.nan_to_num(0).long()
    in_range = (start >= 0) & (end > start) & (end <= lengths.index_select(0, sample))
    label_ok = (label_f == -1) | (label_f == 0) | (label_f == 1)
    # Ordering: within a sample each span starts at or after the previous one's end.
    same_sample_as_prev = torch.zeros_like(sample, dtype=torch.bool)
    same_sample_as_prev[1:] = sample[1:] == sample[:-1]
    prev_end = torch.zeros_like(end)
    prev_end[1:] = end[:-1]
    ordered = ~same_sample_as_prev | (start >= prev_end)
    ok = integral & finite & in_range & label_ok & ordered

    if not bool(ok.all()):
        bad_samples = torch.unique(sample[~ok])
        if on_invalid == "raise":
            k = int(torch.nonzero(~ok)[0])
            i = int(sample[k])
            checks = {
                "non-integer start/end/label": not bool(integral[k]),
                "NaN/inf in start/end/label": not bool(finite[k]),
                f"span [{start_f[k].item()}, {end_f[k].item()}) outside response of length {int(lengths[i])}": not bool(
                    in_range[k]
                ),
                f"label {label_f[k].item()} not in {{-1, 0, 1}}": not bool(label_ok[k]),
                "spans overlap or are not in increasing order": not bool(ordered[k]),
            }
            reason = "; ".join(msg for msg, failed in checks.items() if failed)
            rank = k - int(torch.nonzero(sample == i)[0])
            reject(i, f"decision {rank}: {reason}")
        keep = ~torch.isin(sample, bad_samples)
        dropped += len(bad_samples)
        sample, start, end, channel, label_f = sample[keep], start[keep], end[keep], channel[keep], label_f[keep]

    return Segments(sample, start, end, channel, label_f.long(), batch_size, dropped, missing, noise_order)


def make_record(spans: Sequence[tuple[int, int]], channels: Sequence[str], labels: Sequence[int]) -> dict:
    """Build one sample's record in the contract's shape (for agent loops and tests)."""
    return {
        "start": [int(s) for s, _ in spans],
        "end": [int(e) for _, e in spans],
        "channel": list(channels),
        "label": [int(z) for z in labels],
    }
