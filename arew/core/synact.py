"""SynAct's signal on GRPO groups: mutual information between a decision's action and the outcome.

Several rollouts of one prompt (a GRPO group) that took the same earlier actions and got the
same replies reach the same *state*. A *decision point* is a (group, channel, state) reached
by at least ``min_rollouts`` rollouts; its *arms* are the distinct actions taken there. The
plug-in mutual information I(A; O) (nats) between the arm and the rollout's outcome class
says whether the choice made there explains where the rollouts ended: 0 when the outcome is
constant over the point (or every rollout took the same action), log 2 when two equally
taken actions lead to different classes (SynAct, Sec. 3.1).

Outcome class: 1 when the rollout's reward is above its group's mean, 0 otherwise. It is the
sign GRPO's advantage gives the rollout, it works for binary and continuous rewards alike
(exact reward values would make every continuous outcome its own class, so any action
difference would look consequential), and two classes keep the plug-in estimator's upward
bias at its smallest (SynAct, Table 2). For binary rewards it is the exact reward class.

The agent loop describes each decision by two keys (``extra_fields["arew_decision_keys"]``,
:data:`KEYS_KEY`): ``{"state": [int, ...], "action": [int, ...]}``, one entry per critique
record, integers in [0, 2**63). A state key covers the whole prefix, so a rollout reaches a
given state at most once and a point's decisions are its rollouts.

At outcome-separating points (MI > 0) each decision gets a critique: +1 when its arm's mean
outcome class is above the point's mean, -1 below, 0 elsewhere (:func:`synact_labels`).
Everything is a few ``np.unique`` calls and bincounts over the batch's decisions.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np
import torch

from arew.core.records import CHANNELS, Segments
from arew.core.transforms import turn_index

KEYS_KEY = "arew_decision_keys"
_KEY_FIELDS = frozenset(("state", "action"))
# MI below this is rounding (a constant outcome gives exactly 0; the smallest real value at k rollouts is far larger)
_MI_TOLERANCE = 1e-9
SYNACT_MODES = ("off", "only", "fill")


class DecisionKeyError(ValueError):
    """A sample's decision keys break the contract in this module's docstring."""


@dataclass(frozen=True)
class DecisionKeys:
    """State and action key of each decision of :class:`Segments` (K,), and which decisions have keys."""

    state: np.ndarray  # (K,) int64
    action: np.ndarray  # (K,) int64
    known: np.ndarray  # (K,) bool: False for samples whose keys were missing or dropped
    dropped_samples: int = 0


def _keys_error(raw: object, count: int) -> str | None:
    """Why one sample's keys are malformed, or None; the element checks run on the whole batch (see below)."""
    if not isinstance(raw, dict):
        return f"expected a dict with keys ['action', 'state'], got {type(raw).__name__}"
    if raw.keys() != _KEY_FIELDS:
        return f"expected exactly the keys ['action', 'state'], got {sorted(map(str, raw))}"
    for name in ("state", "action"):
        value = raw[name]
        if not isinstance(value, list):
            return f"'{name}' must be a list, got {type(value).__name__}"
        if len(value) != count:
            return f"'{name}' has {len(value)} entries but the sample has {count} critique records"
    return None


def _element_error(raw: dict) -> str | None:
    if _columns([raw], np.zeros(1, dtype=np.int64)) is None:
        return "'state' and 'action' must hold integers in [0, 2**63)"
    return None


def _columns(raw_keys: Sequence[object], kept: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The kept samples' state and action keys, flattened; None when an entry is no integer of [0, 2**63).

    ``array("q")`` takes exactly the integers an int64 holds (it refuses floats, strings and
    larger integers) and is several times faster than ``np.array`` on a list.
    """
    try:
        state, action = (
            np.frombuffer(array("q", chain.from_iterable(raw_keys[i][name] for i in kept)), dtype=np.int64)
            for name in ("state", "action")
        )
    except (TypeError, OverflowError):
        return None
    if (len(state) and state.min() < 0) or (len(action) and action.min() < 0):
        return None
    return state, action


def collect_decision_keys(
    raw_keys: Sequence[object],
    segments: Segments,
    sample_names: Sequence[str] | None = None,
    on_invalid: str = "raise",
) -> DecisionKeys:
    """Each sample's keys (None: absent) aligned with ``segments``; a malformed entry raises
    :class:`DecisionKeyError` naming the sample or, with ``on_invalid="drop"``, loses its keys and is counted.

    Keys of samples without critique records (none, or dropped by the records' validator) are ignored.
    """
    if len(raw_keys) != segments.batch_size:
        raise ValueError(f"decision keys for {len(raw_keys)} samples, the segments describe {segments.batch_size}")
    counts = segments.count_per_sample.tolist()
    known_samples = np.zeros(segments.batch_size, dtype=bool)
    dropped = 0

    def reject(i: int, reason: str) -> None:
        nonlocal dropped
        if on_invalid == "raise":
            name = sample_names[i] if sample_names is not None else str(i)
            raise DecisionKeyError(f"decision keys ({KEYS_KEY}) of sample {name!r} (row {i}): {reason}")
        known_samples[i] = False
        dropped += 1

    for i, (raw, count) in enumerate(zip(raw_keys, counts)):
        if raw is None or count == 0:
            continue
        reason = _keys_error(raw, count)
        if reason is None:
            known_samples[i] = True
        else:
            reject(i, reason)
    columns = _columns(raw_keys, np.flatnonzero(known_samples))
    if columns is None:
        for i in np.flatnonzero(known_samples):  # rare path: find the offending samples
            reason = _element_error(raw_keys[i])
            if reason is not None:
                reject(int(i), reason)
        columns = _columns(raw_keys, np.flatnonzero(known_samples))
    total = len(segments.sample)
    known = known_samples[segments.sample.numpy()] if total else np.zeros(0, dtype=bool)
    state = np.zeros(total, dtype=np.int64)
    action = np.zeros(total, dtype=np.int64)
    state[known], action[known] = columns
    return DecisionKeys(state, action, known, dropped)


@dataclass(frozen=True)
class SynActResult:
    """Per decision (K,): its point (-1: none), the point's MI and the MI critique; and the step's statistics."""

    point: np.ndarray  # (K,) int64 index into the points, -1 where the decision is at no point
    mi: np.ndarray  # (P,) float64 nats
    labels: torch.Tensor  # (K,) long in {-1, 0, 1}
    stats: dict[str, float]


def outcome_classes(groups: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    """(B,) 1 where the rollout's outcome is above its group's mean, else 0 (see the module docstring)."""
    count = np.bincount(groups).astype(np.float64)
    mean = np.bincount(groups, weights=outcome) / np.maximum(count, 1.0)
    scale = np.maximum(np.abs(mean), 1.0)
    return (outcome > mean[groups] + 1e-6 * scale[groups]).astype(np.int64)


def group_ids(index) -> np.ndarray:
    """verl's group index (uids of any hashable kind) as dense integers."""
    values = np.asarray(index)
    if values.dtype == object:
        values = values.astype(str)
    return np.unique(values, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _dense_ids(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ids 0.. of the distinct (major, minor) pairs (in sorted order) per row, each id's count and one row of it.

    One ``np.lexsort`` of two int64 columns: several times faster than ``np.unique(axis=0)``,
    which sorts rows as opaque bytes.
    """
    order = np.lexsort((minor, major))
    a, b = major[order], minor[order]
    new = np.empty(len(order), dtype=bool)
    new[:1] = True
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    ids = np.empty(len(order), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, np.diff(np.append(np.flatnonzero(new), len(order))), order[new]


def synact(
    segments: Segments, keys: DecisionKeys, groups: np.ndarray, outcome: np.ndarray, min_rollouts: int = 2
) -> SynActResult:
    """Decision points, their MI and the MI critiques of one batch; ``groups``/``outcome`` are per sample (B,)."""
    total = len(segments.sample)
    point_of = np.full(total, -1, dtype=np.int64)
    labels = np.zeros(total, dtype=np.int64)
    sample = segments.sample.numpy()
    channel = segments.channel.numpy()
    groups = np.asarray(groups, dtype=np.int64)
    outcome = np.asarray(outcome, dtype=np.float64)
    if groups.shape != (segments.batch_size,) or outcome.shape != (segments.batch_size,):
        raise ValueError(f"groups and outcome need one entry per sample ({segments.batch_size})")
    rows = np.flatnonzero(keys.known)
    mi = np.zeros(0)
    point_channel = np.zeros(0, dtype=np.int64)
    if len(rows):
        classes = outcome_classes(groups, outcome)[sample[rows]]
        # candidate points: (group, channel, state); keep those reached by min_rollouts rollouts
        candidate, reached, _ = _dense_ids(groups[sample[rows]] * len(CHANNELS) + channel[rows], keys.state[rows])
        is_point = reached >= min_rollouts
        dense = np.cumsum(is_point) - 1
        inside = is_point[candidate]
        rows, classes, point = rows[inside], classes[inside], dense[candidate[inside]]
        n_points = int(is_point.sum())
        if n_points:
            arm, _, first = _dense_ids(point, keys.action[rows])
            arm_point = point[first]
            n_arm = np.bincount(arm).astype(np.float64)
            n_arm_pos = np.bincount(arm, weights=classes)
            n_point = np.bincount(point).astype(np.float64)
            n_point_pos = np.bincount(point, weights=classes)
            # I(A; O) = sum_{a,o} p(a,o) log(p(a,o) / (p(a) p(o))) with every probability a count over N
            cells = np.stack([n_arm - n_arm_pos, n_arm_pos], axis=1)  # (arms, class)
            marginal = np.stack([n_point - n_point_pos, n_point_pos], axis=1)[arm_point]
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.where(cells > 0, cells * np.log(cells * n_point[arm_point, None] / (n_arm[:, None] * marginal)), 0.0)
            mi = np.bincount(arm_point, weights=terms.sum(axis=1), minlength=n_points) / n_point
            mi = np.maximum(mi, 0.0)
            separating = mi > _MI_TOLERANCE
            difference = n_arm_pos / n_arm - (n_point_pos / n_point)[arm_point]
            arm_label = np.where(separating[arm_point], np.sign(np.where(np.abs(difference) > 1e-12, difference, 0.0)), 0)
            labels[rows] = arm_label[arm].astype(np.int64)
            point_of[rows] = point
            point_channel = np.zeros(n_points, dtype=np.int64)
            point_channel[point] = channel[rows]
    turn = turn_index(segments)[0].numpy() if total else np.zeros(0, dtype=np.int64)
    stats = monitor_stats(point_of, mi, point_channel, turn)
    return SynActResult(point_of, mi, torch.from_numpy(labels), stats)


def monitor_stats(point_of: np.ndarray, mi: np.ndarray, point_channel: np.ndarray, turn: np.ndarray) -> dict[str, float]:
    """``arew/synact/<ch>/decision_points|outcome_constant_share|mi`` and the share per turn (``turn<k>``, 1-based)."""
    stats: dict[str, float] = {}
    n_points = len(mi)
    constant = mi <= _MI_TOLERANCE
    # a point's turn: the turn of (any) one of its decisions; the state key fixes the prefix, hence the turn
    point_turn = np.zeros(n_points, dtype=np.int64)
    at_point = point_of >= 0
    point_turn[point_of[at_point]] = turn[at_point]
    for index, name in enumerate(CHANNELS):
        mine = point_channel == index
        count = int(mine.sum())
        stats[f"arew/synact/{name}/decision_points"] = float(count)
        if count == 0:  # NaN: no point this step; logged so every step has the keys (a dashboard panel reads them)
            stats[f"arew/synact/{name}/outcome_constant_share"] = math.nan
            stats[f"arew/synact/{name}/mi"] = math.nan
            continue
        stats[f"arew/synact/{name}/outcome_constant_share"] = float(constant[mine].mean())
        stats[f"arew/synact/{name}/mi"] = float(mi[mine].mean())
        turns = point_turn[mine]
        per_turn = np.bincount(turns)
        per_turn_constant = np.bincount(turns, weights=constant[mine].astype(np.float64), minlength=len(per_turn))
        for k in np.flatnonzero(per_turn):  # (the turns that have points: a handful of metric keys)
            stats[f"arew/synact/{name}/turn{k}/outcome_constant_share"] = float(per_turn_constant[k] / per_turn[k])
    return stats


def apply_synact(segments: Segments, result: SynActResult, mode: str) -> tuple[Segments, dict[str, float]]:
    """Segments whose labels the MI critiques replace (``only``) or fill where the rule gave 0 (``fill``), and their counts."""
    if mode not in SYNACT_MODES:
        raise ValueError(f"synact mode must be one of {list(SYNACT_MODES)}, got {mode!r}")
    if mode == "off":
        return segments, {}
    mi_labels = result.labels
    if mode == "only":
        label, placed = mi_labels, mi_labels != 0
    else:
        placed = (segments.label == 0) & (mi_labels != 0)
        label = torch.where(placed, mi_labels, segments.label)
    stats: dict[str, float] = {}
    code = segments.channel[placed] * 2 + (mi_labels[placed] > 0).long()
    neg_pos = torch.bincount(code, minlength=2 * len(CHANNELS)).view(-1, 2).tolist()
    for index, name in enumerate(CHANNELS):
        stats[f"arew/synact/{name}/critique_neg"] = float(neg_pos[index][0])
        stats[f"arew/synact/{name}/critique_pos"] = float(neg_pos[index][1])
    return replace(segments, label=label), stats
