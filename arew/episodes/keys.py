"""Decision keys of one episode for the SynAct monitor (:mod:`arew.core.synact`): what was done, and from where.

The action key hashes the decision's payload (the text inside its ``<interact>`` or ``<answer>``
tag, whitespace collapsed), or the whole text, whitespace collapsed, when it carries no
well-formed payload. The state key hashes everything the environment saw before the decision:
each earlier decision's channel, action key and the reply it got. Rollouts of one prompt
that took the same earlier actions and got the same replies therefore share a state key.
Keys are stable across processes and runs (BLAKE2b, not Python's salted ``hash``).
"""

from __future__ import annotations

import hashlib
import re

from arew.envs.parsing import extract_payload, payload_kind
from arew.episodes.driver import EpisodeLog

_WHITESPACE = re.compile(r"\s+")
_KEY_MASK = 2**63 - 1


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=8).digest()


def _as_key(digest: bytes) -> int:
    return int.from_bytes(digest, "big") & _KEY_MASK


def action_text(text: object) -> str:
    """The part of a turn that identifies its action: its payload, else the text, whitespace-normalised."""
    kind = payload_kind(text)
    if kind is not None:
        payload = extract_payload(text, kind)
        if payload.ok:
            return f"{kind}:{_WHITESPACE.sub(' ', payload.value).strip()}"
    return "text:" + _WHITESPACE.sub(" ", text if isinstance(text, str) else "").strip()


def decision_keys(log: EpisodeLog) -> dict[str, list[int]]:
    """``{"state": [...], "action": [...]}``, one integer in [0, 2**63) per decision of ``log``, in its order."""
    state = _digest(b"arew-state")
    states: list[int] = []
    actions: list[int] = []
    for channel, text, reply in zip(log.channels, log.texts, log.replies):
        action = _digest(action_text(text).encode("utf-8", "surrogatepass"))
        states.append(_as_key(state))
        actions.append(_as_key(action))
        seen = "\x00".join((channel, action.hex(), "" if reply is None else "r:" + reply))
        state = _digest(state + seen.encode("utf-8", "surrogatepass"))
    return {"state": states, "action": actions}
