"""How one episode fails without failing its batch: the reasons, the deadline, the once-per-kind traceback.

Training (:mod:`arew.verl_plugin.agent_loop`) turns a failed episode into a sample that trains
nothing; ``arew eval`` records it as failed in its results. Both name the reason the same way.
"""

from __future__ import annotations

import asyncio
import logging

# where an episode can fail: building it, generating, inside the environment, in its critique source, assembling its result, or out of time
FAILURE_REASONS = ("setup", "generation", "environment", "critique", "result", "deadline")


class EpisodeDeadline(Exception):
    """The episode overran its wall-clock limit."""


async def within_deadline(coroutine, seconds: float | None, key: str = "episode_timeout"):
    """Await ``coroutine``, cancelling it and raising :class:`EpisodeDeadline` after ``seconds`` (None: no limit).

    Unlike ``asyncio.wait_for`` this tells the deadline apart from a ``TimeoutError`` raised inside;
    ``key`` names the setting in the message.
    """
    if seconds is None:
        return await coroutine
    task = asyncio.ensure_future(coroutine)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no "never retrieved" warning
        raise EpisodeDeadline(f"the episode ran longer than {key}={seconds:g} s")
    return task.result()


def log_failure_once(
    log: logging.Logger, seen: set[tuple[str, str]], source: str, name: str, reason: str, error: BaseException, outcome: str
) -> None:
    """Traceback of the first failure of each (reason, error type) in ``seen``; later ones are only counted."""
    kind = (reason, type(error).__name__)
    if kind in seen:
        return
    seen.add(kind)
    log.error(
        "%s: episode %s failed in %s (%s: %s); %s. Later %s failures of this kind are counted, not logged.",
        source, name, reason, type(error).__name__, error, outcome, reason,
        exc_info=None if isinstance(error, EpisodeDeadline) else (type(error), error, error.__traceback__),
    )  # fmt: skip
