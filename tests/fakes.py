"""Fakes and polling helpers that several test folders share: a loopback chat-completions server, a scripted
rollout server for the agent loop, and one polling loop. Importable as ``fakes`` from any test module or
conftest (pyproject's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

import asyncio
import copy
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web


# ---- a chat-completions server -------------------------------------------------------------------------------
def completion(text, finish_reason="stop", usage=None, **choice) -> dict:
    """A chat-completion body with one assistant message, as vLLM and the OpenAI API send it; ``choice``
    adds fields to the choice (vLLM's ``stop_reason``, SGLang's ``matched_stop``)."""
    message = {"role": "assistant", "content": text}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish_reason, **choice}]}
    if usage is not None:
        body["usage"] = usage
    return body


@dataclass(frozen=True)
class Delayed:
    seconds: float
    answer: object


def delay(seconds: float, answer) -> Delayed:
    """``answer`` (any answer a script may give) after ``seconds``: a slow server, for timeouts and for
    requests held in flight."""
    return Delayed(seconds, answer)


def respond(answer) -> web.Response:
    """The response for one answer of a script (see :class:`FakeChatServer`)."""
    if isinstance(answer, str):
        return web.json_response(completion(answer))
    if isinstance(answer, bytes):  # a body the client must survive: not JSON, cut short, oversized
        return web.Response(body=answer, content_type="application/json")
    if isinstance(answer, int) and not isinstance(answer, bool):
        return web.Response(status=answer, text="error")
    if isinstance(answer, (dict, list)):
        return web.json_response(answer)
    raise TypeError(f"a fake chat server's script answered {answer!r}")


class FakeChatServer:
    """An OpenAI-style chat-completions endpoint whose every answer the test decides: ``script(n, body)``
    answers the n-th request (0-based, ``body`` its JSON) with a str (the assistant's reply text, finish_reason
    "stop"), a dict or list (the JSON body as it is), an int (an HTTP error status), bytes (a raw body sent as
    application/json), or ``delay(seconds, answer)``. Serve it with the ``serve`` fixture (conftest.py).

    What the clients sent is kept for the assertions: ``bodies`` (copies, so that a client reusing its message
    list cannot rewrite history), ``headers``, and ``max_in_flight`` against the concurrency limits."""

    def __init__(self, script):
        self.script = script
        self.bodies, self.headers = [], []
        self.in_flight = self.max_in_flight = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        n = len(self.bodies)
        self.bodies.append(copy.deepcopy(body))
        self.headers.append(dict(request.headers))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            answer = self.script(n, body)
            while isinstance(answer, Delayed):
                await asyncio.sleep(answer.seconds)
                answer = answer.answer
            return respond(answer)
        finally:
            self.in_flight -= 1


# ---- an agent for the episode driver ----------------------------------------------------------------------------
class ScriptedAgent:
    """A transcript (:class:`arew.episodes.driver.Transcript`) whose agent writes ``texts`` in turn; every round
    fits and every message is taken; a counterfactual generation is a test's mistake (the task asks for none)."""

    def __init__(self, texts):
        self.texts = list(texts)

    def round_fits(self) -> bool:
        return True

    async def generate(self) -> str:
        return self.texts.pop(0)

    def add_feedback(self, text: str) -> bool:
        return True

    async def counterfactual_update(self, feedback: str) -> str:
        raise AssertionError("a scripted agent writes no counterfactual update")

    async def counterfactual_action(self, belief: str) -> str | None:
        raise AssertionError("a scripted agent writes no counterfactual action")


# ---- a rollout server for the agent loop --------------------------------------------------------------------
class ScriptedServer:
    """A policy that writes the next of ``texts`` (then end-of-turn) at each generate call, so that an agent-loop
    test knows every turn; cut at ``max_tokens`` as an engine would. ``calls`` keeps each call's prompt ids and
    sampling parameters; ``texts`` what is left unsaid. ``end_of_turn=False``: no end-of-turn token, as an engine
    returns a turn that one of the loop's stop strings ended."""

    def __init__(self, tokenizer, texts, end_of_turn: bool = True):
        self.tokenizer, self.texts, self.calls, self.end_of_turn = tokenizer, list(texts), [], end_of_turn

    @property
    def prompts(self) -> list[str]:
        """The prompts the calls got, decoded."""
        return [self.tokenizer.decode(call["prompt_ids"]) for call in self.calls]

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        # verl is heavy: only the agent-loop tests load it
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": dict(sampling_params)})
        ids = self.tokenizer.encode(self.texts.pop(0), add_special_tokens=False) + [self.tokenizer.eos_token_id] * self.end_of_turn
        ids = ids[: sampling_params["max_tokens"]]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


# ---- polling ----------------------------------------------------------------------------------------------------
def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log, for failure messages about the process that wrote it."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_until(predicate, what: str, limit: float = 120.0, interval: float = 0.2, log: Path | None = None):
    """``predicate()``'s first truthy value, polled every ``interval`` seconds. The limit is generous, only
    against hangs: nothing is timed. A failure names ``what`` and shows the tail of ``log`` if given."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"gave up waiting for {what} after {limit:g} s" + (f"; last log lines ({log}):\n{log_tail(log)}" if log else ""))
