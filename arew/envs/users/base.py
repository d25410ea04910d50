"""The simulated-user interface shared by MediQ (a patient) and FloDial (a troubleshooting user).

An environment builds a request and awaits ``user.reply(request)``:

- :class:`FactRequest` (MediQ): the doctor's question, the patient's facts and the ids of
  the facts not revealed yet; the reply names up to ``max_facts`` of those ids, or none
  ("Unknown").
- :class:`RowRequest` (FloDial): the agent's question and the reference table of yes/no
  questions; the reply names the one row the question asks about, or none. The answer
  (Yes/No) is read from the table by the environment, never from the user's text.

Ids in a :class:`UserReply` are 0-based positions in ``facts`` / ``rows``. A reply never
raises and never fails: when the LLM server cannot answer, the user falls back (see
:mod:`arew.envs.users.llm`) and says so in ``source`` and ``error``. Every user carries a
:class:`UserStats` of its own (per episode: environments build one user per episode) and
adds the same counts to the process-wide :data:`PROCESS_STATS`.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FactRequest:
    question: str
    facts: tuple[str, ...]
    candidates: tuple[int, ...]
    max_facts: int = 2


@dataclass(frozen=True)
class RowRequest:
    question: str
    rows: tuple[str, ...]
    problem: str = ""


UserRequest = FactRequest | RowRequest


@dataclass(frozen=True)
class UserReply:
    """Selected ids (0-based), empty for "Unknown"; ``source`` is "offline", "llm" or "fallback"."""

    ids: tuple[int, ...]
    source: str
    error: str | None = None

    @property
    def unknown(self) -> bool:
        return not self.ids


@dataclass
class UserStats:
    """Counts of one user (or of the process, :data:`PROCESS_STATS`).

    ``calls``: replies given; ``requests``: HTTP attempts; ``retries``: attempts after the
    first; ``fallbacks``: replies not taken from the LLM; ``parse_failures``: LLM replies
    that broke the format; ``timeouts``, ``connection_errors``, ``http_errors``: failed
    attempts by kind; ``short_circuits``: attempts not made because the circuit was open.
    """

    calls: int = 0
    requests: int = 0
    retries: int = 0
    fallbacks: int = 0
    parse_failures: int = 0
    timeouts: int = 0
    connection_errors: int = 0
    http_errors: int = 0
    short_circuits: int = 0

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {prefix + key: float(value) for key, value in asdict(self).items()}


PROCESS_STATS = UserStats()


def count(stats: UserStats, name: str, n: int = 1, process: UserStats = PROCESS_STATS) -> None:
    """Add ``n`` to counter ``name`` of ``stats`` and of the process's counts (``process``)."""
    setattr(stats, name, getattr(stats, name) + n)
    if stats is not process:
        setattr(process, name, getattr(process, name) + n)


class SimulatedUser(abc.ABC):
    def __init__(self) -> None:
        self.stats = UserStats()

    @abc.abstractmethod
    async def reply(self, request: UserRequest) -> UserReply: ...
