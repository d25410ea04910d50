"""Play a task's episodes with a chat model through the episode driver; every episode goes to a JSONL file.

Episodes are named as in training (``split:row:session``, :func:`arew.episodes.episode_name`)
and seeded the same way, so an episode of ``arew eval`` and of the ``arew_agent`` loop with the
same generations is the same episode. ``episodes.jsonl`` gets one line per finished episode as it
finishes; a rerun into the same folder skips every episode already there (``retry_failed``:
except the failed ones), so an interrupted evaluation resumes where it stopped.

A failing episode fails alone, as in training (:mod:`arew.episodes.failures`): its line has
``failed: {reason, error}`` and reward 0, and the first failure of each kind is logged with its
traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arew.critiques.settings import CritiquePlan
from arew.envs.registry import make_env
from arew.envs.rows import json_lines
from arew.episodes import OVERFLOW_POLICIES, EpisodeCritiques, EpisodeLog, episode_name, episode_seed, play
from arew.episodes.failures import EpisodeDeadline, log_failure_once, within_deadline
from arew.eval.model import ChatModel, GenerationParams
from arew.eval.transcript import Budget, ChatTranscript, TokenCounter

logger = logging.getLogger(__name__)

# the default counter: about 4 characters a token (frozen, so one instance serves every call)
ESTIMATED_TOKENS = TokenCounter()
EPISODES_FILE = "episodes.jsonl"
_LOGGED_FAILURES: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class EvalConfig:
    """What ``arew eval`` plays; the budget defaults are the training recipe's (``arew/configs/base/arew.yaml``)."""

    n: int = 1  # episodes per prompt (sessions 0..n-1)
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    seed: int | None = 0  # sampling seed base (None: unseeded); each episode and call derives its own
    response_length: int = 8192
    max_tokens_per_turn: int = 512
    feedback_reserve_tokens: int = 256
    overflow: str = "answer_now"
    stop: tuple[str, ...] = ("</interact>", "</answer>")
    env_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int = 64  # episodes in flight
    episode_timeout: float | None = 1800.0
    retry_failed: bool = False
    critiques: CritiquePlan | None = None  # a critique source beside the rules (arew eval --critique-source)

    def __post_init__(self) -> None:
        checks = {
            "n": self.n >= 1,
            "temperature": self.temperature >= 0,
            "top_p": 0 < self.top_p <= 1,
            "concurrency": self.concurrency >= 1,
            "max_tokens_per_turn": self.max_tokens_per_turn >= 1,
            "feedback_reserve_tokens": self.feedback_reserve_tokens >= 0,
            "response_length": self.response_length >= 2 * self.max_tokens_per_turn + self.feedback_reserve_tokens,
            "overflow": self.overflow in OVERFLOW_POLICIES,
            "episode_timeout": self.episode_timeout is None or self.episode_timeout > 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"{key}: invalid value {getattr(self, key)!r}" + (
                    " (must hold one round, its feedback and the answer: 2 * max_tokens_per_turn + feedback_reserve_tokens)"
                    if key == "response_length" else ""))  # fmt: skip

    @property
    def budget(self) -> Budget:
        return Budget(self.response_length, self.max_tokens_per_turn, self.feedback_reserve_tokens)


def read_episodes(folder: Path) -> dict[str, dict[str, Any]]:
    """The episodes already in ``folder`` by name (the last line of a name wins; a torn last line is ignored)."""
    path = Path(folder) / EPISODES_FILE
    episodes: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return episodes
    records, _ = json_lines(path)  # an interrupted write's line is left out
    for record in records:
        if isinstance(record, dict) and "name" in record:
            episodes[record["name"]] = record
    return episodes


async def evaluate(
    model: ChatModel,
    rows: list[dict[str, Any]],
    config: EvalConfig,
    folder: Path,
    tokens: TokenCounter = ESTIMATED_TOKENS,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (row, session) episode's record, playing those not yet in ``folder``; in row, session order."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    done = read_episodes(folder)
    wanted = [(row, session, episode_name(row["extra_info"], session)) for row in rows for session in range(config.n)]
    todo = [(row, s, name) for row, s, name in wanted if name not in done or (config.retry_failed and done[name].get("failed"))]
    slots = asyncio.Semaphore(config.concurrency)
    path = folder / EPISODES_FILE
    with open(path, "a+b") as sink:
        if sink.tell() > 0:
            sink.seek(-1, 2)
            if sink.read(1) != b"\n":  # an interrupted write: the next record starts on its own line
                sink.write(b"\n")

        async def one(row: dict[str, Any], session: int, name: str) -> None:
            async with slots:
                record = await play_episode(model, row, session, config, tokens)
            sink.write((json.dumps(record) + "\n").encode())
            sink.flush()
            done[name] = record
            if on_episode:
                on_episode(record)

        await asyncio.gather(*(one(*item) for item in todo))
    return [done[name] for _, _, name in wanted]


async def play_episode(
    model: ChatModel, row: dict[str, Any], session: int, config: EvalConfig, tokens: TokenCounter = ESTIMATED_TOKENS
) -> dict[str, Any]:
    """One episode's record: reward, episode numbers, turns with their critiques, or why it failed."""
    info = row["extra_info"]
    name = episode_name(info, session)
    seed = episode_seed(name)
    log = EpisodeLog()
    transcript: ChatTranscript | None = None
    started = time.perf_counter()
    record: dict[str, Any] = {"name": name, "task": info.get("task"), "data_source": row.get("data_source"), "row": info.get("index"),
                              "session": session, "model": model.name}  # fmt: skip

    async def run() -> tuple[float, dict[str, float]]:
        nonlocal transcript
        env = make_env(info["task"], info, seed, **config.env_options)
        messages = list(row.get("prompt") or env.initial_messages())
        params = GenerationParams(
            max_tokens=config.max_tokens_per_turn, temperature=config.temperature, top_p=config.top_p,
            stop=tuple(config.stop), seed=None if config.seed is None else (config.seed + seed) % 2**31,
        )  # fmt: skip
        transcript = ChatTranscript(model, messages, params, config.budget, tokens)
        record["prompt_messages"] = len(messages)
        critiques = None if config.critiques is None else EpisodeCritiques(config.critiques, info["task"], info, tuple(messages), name)
        final = await play(env, transcript, log, config.overflow, critiques)
        log.phase = "result"
        return float(env.reward()), log.info(final, env.proxies())

    try:
        reward, numbers = await within_deadline(run(), config.episode_timeout, "--episode-timeout")
        record.update(reward=reward, failed=None, info=numbers)
    except Exception as error:  # one episode's failure must not end the evaluation
        reason = "deadline" if isinstance(error, EpisodeDeadline) else log.phase
        log_failure_once(logger, _LOGGED_FAILURES, "arew eval", name, reason, error, "it is recorded as failed")
        record.update(reward=0.0, failed={"reason": reason, "error": f"{type(error).__name__}: {error}"[:2000]}, info=log.info(None, {}))
    record["info"].update(
        response_tokens=float(transcript.response_tokens if transcript else 0),
        generations=float(transcript.generations if transcript else 0),
        counterfactual_generations=float(transcript.side_generations if transcript else 0),
    )
    record["seconds"] = time.perf_counter() - started
    record["turns"] = log.turns()
    return record
