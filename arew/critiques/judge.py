"""The ``judge`` source: an instruction-tuned model behind any OpenAI-compatible endpoint labels each decision.

Requests go through :class:`arew.chat.ChatCompletionClient` (concurrency limit, timeout per attempt,
retries with backoff, a circuit breaker per endpoint, a cap on the reply's size), with the prompts of
:mod:`arew.critiques.judge_prompts`. ``mode=decision`` sends one request per decision, all of an
episode's at once (the server batches them); ``mode=episode`` sends one request that numbers the
decisions and asks for a line each: fewer, longer requests, and a model that loses count loses labels.

Replies are read strictly (:func:`parse_judgement`, :func:`parse_episode_judgement`); a reply that
names no label, or two different ones for a decision, or that the length cap cut before its label, is
no critique (``label=None``): it never raises and never guesses. Failed requests and unreadable
replies are counted (``episode/critique_judge_*``) and logged (the first of the process, then at
each power of two), and ``arew_agent.critiques.on_missing`` decides the decision's label.

A process-wide cache keyed by the request (model, sampling, the decision's context) answers a
context seen before without a request: GRPO's repeated samples of a prompt often open alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from arew.chat import ChatCompletionClient, ClientConfig, RequestFailed
from arew.chat.client import COUNTERS, RequestCounts
from arew.critiques.base import CritiqueSource, EpisodeContext, SourceCritique
from arew.critiques.judge_prompts import (
    CRITIQUE_LINE,
    NUMBERED_LINE,
    REASON_LINE,
    TEMPLATES,
    decision_messages,
    episode_messages,
)
from arew.schema import setting

logger = logging.getLogger(__name__)

JUDGE_MODES = ("decision", "episode")
REASON_CHARS = 200
def _label(text: str) -> int:
    return -1 if text[0] in "-\u2212" else int(text.lstrip("+"))


def parse_judgement(text: str, truncated: bool = False) -> tuple[int | None, str]:
    """(label, reason) of a one-decision reply, or (None, why not): exactly one label among its CRITIQUE lines;
    a reply the length cap cut counts only with its REASON line begun after the label (a whole verdict)."""
    matches = list(CRITIQUE_LINE.finditer(text or ""))
    found = {_label(m.group("label")) for m in matches}
    if len(found) == 1 and truncated and not REASON_LINE.search(text, matches[-1].end()):
        return None, f"cut by the length cap before its verdict was whole: {text[:80]!r}"
    if len(found) != 1:
        if found:
            return None, f"two different labels in one reply: {text[:80]!r}"
        why = "cut by the length cap before its label" if truncated else "no 'CRITIQUE: +1/0/-1' line"
        return None, f"{why}: {(text or '')[:80]!r}"
    reason = REASON_LINE.search(text)
    rest = next(CRITIQUE_LINE.finditer(text)).group("rest").strip(" -:")
    return found.pop(), (reason.group("reason").strip() if reason else rest)[:REASON_CHARS]


def parse_episode_judgement(text: str, decisions: int, truncated: bool = False) -> list[tuple[int | None, str]]:
    """One (label, reason) per decision from ``D<n>: <label> reason`` lines; (None, why) for a decision
    with no line, with lines that disagree, or numbered outside 1..decisions (those are ignored)."""
    seen: dict[int, set[int]] = {}
    reasons: dict[int, str] = {}
    for match in NUMBERED_LINE.finditer(text or ""):
        index = int(match.group("index")) - 1
        if 0 <= index < decisions:
            seen.setdefault(index, set()).add(_label(match.group("label")))
            reasons.setdefault(index, match.group("reason").strip()[:REASON_CHARS])
    missing = "cut by the length cap before its line" if truncated else "no 'D<n>: +1/0/-1' line for it"
    result: list[tuple[int | None, str]] = []
    for index in range(decisions):
        labels = seen.get(index, set())
        if len(labels) == 1:
            result.append((next(iter(labels)), reasons[index]))
        else:
            result.append((None, "lines that disagree" if labels else missing))
    return result


@dataclass(frozen=True)
class JudgeConfig(ClientConfig):
    """The judge's client settings (defaults for a judge) and how it asks."""

    url: str = "http://127.0.0.1:8000/v1"
    model: str = "Qwen/Qwen2.5-7B-Instruct"
    timeout: float = 30.0
    max_retries: int = 2
    mode: str = setting("decision", "decision: one request per decision, an episode's sent together | episode: one request labels them all", choices=JUDGE_MODES)
    template: str = setting("auto", "Prompt: auto (the task family's guide, else generic) | generic | pe | mediq | flodial | tau2", choices=TEMPLATES)
    temperature: float = setting(0.0, "Sampling temperature", low=0)
    max_tokens: int = setting(64, "Reply length cap per decision (mode=episode: this times the episode's decisions)", low=1)
    context_chars: int = setting(8000, "Longest transcript shown in one request, in characters (the latest turns are kept)", low=200)
    cache_size: int = setting(20000, "Judgements kept per process, keyed by the request (0: no cache)", low=0)


_CACHE: OrderedDict[str, tuple[int, str]] = OrderedDict()
_FAILURES = {"count": 0}


def clear_cache() -> None:
    """Forget every judgement of this process (a benchmark's cold start)."""
    _CACHE.clear()


def _cache_key(config: JudgeConfig, messages: list[dict[str, str]], max_tokens: int) -> str:
    body = json.dumps([config.url, config.model, config.temperature, max_tokens, messages], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _remember(config: JudgeConfig, key: str, value: tuple[int, str]) -> None:
    if config.cache_size == 0:
        return
    _CACHE[key] = value
    _CACHE.move_to_end(key)
    while len(_CACHE) > config.cache_size:
        _CACHE.popitem(last=False)


class JudgeSource(CritiqueSource):
    """The ``judge`` source (module docstring)."""

    CONFIG = JudgeConfig

    def __init__(self, config: JudgeConfig, task: str):
        super().__init__(config, task)
        self.counts = RequestCounts()
        self.client = ChatCompletionClient(config, counters=(self.counts,))
        for name in ("unreadable", "request_failures", "cache_hits"):  # every episode logs every count, 0 or not
            self.stats[f"judge_{name}"] = 0.0

    async def critique(self, episode: EpisodeContext) -> list[SourceCritique]:
        started = time.perf_counter()
        if not episode.decisions:
            return []
        if self.config.mode == "decision":
            critiques = await asyncio.gather(*(self._one(episode, k) for k in range(len(episode.decisions))))
        else:
            critiques = await self._all(episode)
        for name in COUNTERS:
            self.count(f"judge_{name}", getattr(self.counts, name))
        self.count("judge_seconds", time.perf_counter() - started)
        return list(critiques)

    async def _ask(self, messages: list[dict[str, str]], max_tokens: int) -> tuple[str, bool] | str:
        """The reply's text and whether the length cap cut it, or why no reply came (counted, logged)."""
        try:
            reply = await self.client.complete(messages, temperature=self.config.temperature, max_tokens=max_tokens)
        except RequestFailed as failure:
            self._failed("request_failures", f"request failed: {failure}")
            return f"request failed: {failure}"
        return reply.text, reply.finish_reason == "length"

    async def _one(self, episode: EpisodeContext, index: int) -> SourceCritique:
        config = self.config
        messages = decision_messages(episode, index, config.template, config.context_chars)
        key = _cache_key(config, messages, config.max_tokens)
        if config.cache_size and key in _CACHE:
            self.count("judge_cache_hits")
            return SourceCritique(*_CACHE[key], cached=True)
        answer = await self._ask(messages, config.max_tokens)
        if isinstance(answer, str):
            return SourceCritique(None, answer)
        label, reason = parse_judgement(*answer)
        if label is None:
            self._failed("unreadable", f"unreadable reply ({reason})")
            return SourceCritique(None, reason)
        _remember(config, key, (label, reason))
        return SourceCritique(label, reason)

    async def _all(self, episode: EpisodeContext) -> list[SourceCritique]:
        config = self.config
        n = len(episode.decisions)
        messages = episode_messages(episode, config.template, config.context_chars)
        max_tokens = config.max_tokens * n
        key = _cache_key(config, messages, max_tokens)
        if config.cache_size and key in _CACHE:
            self.count("judge_cache_hits", n)
            labels, reasons = _CACHE[key]
            return [SourceCritique(z, r, cached=True) for z, r in zip(labels, reasons)]
        answer = await self._ask(messages, max_tokens)
        if isinstance(answer, str):
            return [SourceCritique(None, answer) for _ in range(n)]
        parsed = parse_episode_judgement(answer[0], n, answer[1])
        unreadable = sum(label is None for label, _ in parsed)
        if unreadable:
            self._failed("unreadable", f"{unreadable} of {n} decisions without a readable line: {answer[0][:80]!r}", unreadable)
        else:
            _remember(config, key, tuple(zip(*parsed)))
        return [SourceCritique(label, reason) for label, reason in parsed]

    def _failed(self, counter: str, message: str, n: int = 1) -> None:
        self.count(f"judge_{counter}", n)
        _FAILURES["count"] += 1
        total = _FAILURES["count"]
        if total & (total - 1) == 0:
            logger.warning(
                "critique judge at %s: %s; the decision gets arew_agent.critiques.on_missing's label (%d judge failures in this process)",
                self.config.endpoint, message, total,
            )  # fmt: skip
