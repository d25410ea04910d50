"""Fakes and polling helpers that several test folders share: a loopback chat-completions server, a scripted
rollout server for the agent loop, and one polling loop. Importable as ``fakes`` from any test module or
conftest (pyproject's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
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


# ---- a hostile server: the fault probe's replies, at the socket ----------------------------------------------------
def _http(body: bytes, content_type: str = "application/json", status: str = "200 OK", length: int | None = None) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body) if length is None else length}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


def _json_reply(text: str) -> bytes:
    import json

    return json.dumps(completion(text)).encode()


async def _huge_chunked(writer, text: str) -> int:
    """A reply whose JSON goes on with 50 MB of spaces, streamed without a Content-Length until the client hangs up."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece, sent = b" " * 65536, 0
    body = _json_reply(text)
    writer.write(b"%x\r\n%s\r\n" % (len(body) - 1, body[:-1]))
    while sent < 50_000_000:
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await writer.drain()
        sent += len(piece)
    return sent


async def _trickle(writer, text: str) -> int:
    """A valid reply at one byte a second."""
    reply = _http(_json_reply(text))
    for k in range(len(reply)):
        writer.write(reply[k : k + 1])
        await writer.drain()
        await asyncio.sleep(1.0)
    return len(reply)


async def _reset(writer, text: str) -> int:
    """The connection reset (RST, not a clean close) before any byte of the answer."""
    import socket
    import struct

    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return 0


# name -> (the answer: the response's bytes given the reply text, or a coroutine that writes it and returns the body
# bytes sent; whether a client can read a reply from it)
HOSTILE_REPLIES = {
    "50 MB body, length declared": (lambda text: _http(b"{", length=50_000_000), False),
    "50 MB body, chunked": (_huge_chunked, False),
    "one byte a second": (_trickle, False),
    "connection reset": (_reset, False),
    "body shorter than its length": (lambda text: _http(_json_reply(text)[:20], length=4096), False),
    "invalid UTF-8": (lambda text: _http(_json_reply(text).replace(b'"content": "', b'"content": "\xff\xfe')), False),
    "HTML page": (lambda text: _http(f"<html><body><p>{text}</p></body></html>".encode(), "text/html"), False),
    "JSON null": (lambda text: _http(b"null"), False),
    "JSON string": (lambda text: _http(b'"' + text.encode() + b'"'), False),
    "choices a string": (lambda text: _http(b'{"choices": "' + text.encode() + b'"}'), False),
    "choice null": (lambda text: _http(b'{"choices": [null]}'), False),
    "message a string": (lambda text: _http(b'{"choices": [{"message": "' + text.encode() + b'"}]}'), False),
    "content a number": (lambda text: _http(b'{"choices": [{"message": {"role": "assistant", "content": 5}}]}'), False),
    "content a list": (lambda text: _http(b'{"choices": [{"message": {"content": ["' + text.encode() + b'"]}}]}'), False),
    "completions API shape": (lambda text: _http(b'{"choices": [{"text": "' + text.encode() + b'"}]}'), False),
    "lone surrogate": (lambda text: _http(_json_reply(text + " \ud800")), True),  # as JSON writes it: an escape
    "usage and finish reason of wrong types": (
        lambda text: _http(b'{"choices": [{"message": {"content": "' + text.encode() + b'"}, "finish_reason": 7}], "usage": {"prompt_tokens": "many"}}'),
        True,
    ),
}  # fmt: skip


class HostileServer:
    """A loopback HTTP endpoint that answers every request with one of :data:`HOSTILE_REPLIES`, written at the
    socket (what a well-behaved web framework would not send: lies about lengths, resets, trickles), wrapping
    ``text``, the reply a client would accept, wherever the reply carries one. ``sent`` counts the body bytes the
    clients let it send. Use as ``async with HostileServer(name, text) as url``."""

    def __init__(self, name: str, text: str):
        self.answer, self.readable = HOSTILE_REPLIES[name]
        self.text, self.sent, self.requests = text, 0, 0
        self.tasks: set[asyncio.Task] = set()

    async def _serve(self, reader, writer) -> None:
        self.tasks.add(asyncio.current_task())
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            self.requests += 1
            if asyncio.iscoroutinefunction(self.answer):
                self.sent += await self.answer(writer, self.text)
            else:
                response = self.answer(self.text)
                writer.write(response)
                self.sent += len(response)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client hung up: what a hostile server sees of a client that protects itself
        finally:
            writer.close()
            self.tasks.discard(asyncio.current_task())

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/{uuid.uuid4().hex}/v1"

    async def __aexit__(self, *exc) -> None:
        for task in list(self.tasks):
            task.cancel()
        self.server.close()
        await self.server.wait_closed()


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
