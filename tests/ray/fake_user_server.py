"""A stand-in for the simulated user's OpenAI-compatible server (aiohttp, no model, no GPU).

Run as the user service's command: it listens on ``$HOST:$PORT`` (127.0.0.1 when HOST is unset),
answers ``GET /health`` and ``POST /v1/chat/completions`` with a fixed MediQ patient reply, and, when
``FAKE_USER_DIR`` is set, writes its pid to ``pids`` and one line per chat request to
``requests`` in that folder, so that tests can tell it was used and that it was stopped.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiohttp import web

REPLY = "FACTS: NONE"  # the MediQ patient prompt's answer format (arew/envs/users/prompts.py): no fact answers it


def _append(name: str, text: str) -> None:
    folder = os.environ.get("FAKE_USER_DIR")
    if folder:
        with open(Path(folder) / name, "a") as handle:
            handle.write(text + "\n")


async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def chat(request: web.Request) -> web.Response:
    body = await request.json()
    _append("requests", str(body.get("model")))
    return web.json_response(
        {
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 4},
        }
    )


def main() -> None:
    _append("pids", str(os.getpid()))
    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ["PORT"]), print=None)


if __name__ == "__main__":
    main()
