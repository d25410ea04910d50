"""Shared fixtures: loopback chat servers (fakes.py), the offline tokenizer and tiny model (arew.tiny_models), a local
TransferQueue, a MediQ file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arew.tiny_models import build_chat_tokenizer, build_tiny_model
from fakes import FakeChatServer

# a test's tier is the first of these markers it carries, else "fast" (benchmarks/suite_times.py reads it
# from the JUnit report, where it is the property "tier")
SLOW_TIERS = ("vllm", "e2e", "ray", "browser")


def pytest_collection_modifyitems(items):
    """A test that uses the ``transfer_queue`` fixture starts Ray: it belongs to the ``ray`` tier."""
    for item in items:
        if "transfer_queue" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
        markers = {mark.name for mark in item.iter_markers()}
        item.user_properties.append(("tier", next((tier for tier in SLOW_TIERS if tier in markers), "fast")))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


@pytest.fixture(scope="session")
def process_alive():
    """Whether a process id names a running process (a zombie waiting for its parent does not count)."""
    return _process_alive


@pytest.fixture
async def chat_server():
    """``await chat_server(handler)`` serves ``handler`` as a loopback chat-completions endpoint and
    returns its base URL; each under a path of its own, so that the process-wide circuit breaker of
    one test's endpoint never meets another test that gets the same port. Stopped after the test."""
    import uuid

    from aiohttp import web

    runners = []

    async def start(handler) -> str:
        app = web.Application()
        prefix = f"/{uuid.uuid4().hex}/v1"
        app.router.add_post(prefix + "/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}{prefix}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def serve(chat_server):
    """``server, url = await serve(script)``: a :class:`fakes.FakeChatServer` answering by ``script`` at a loopback URL."""

    async def start(script):
        server = FakeChatServer(script)
        return server, await chat_server(server.handle)

    return start


@pytest.fixture(scope="session")
def chat_tokenizer():
    return build_chat_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(chat_tokenizer):
    return build_tiny_model(chat_tokenizer)


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray with verl's TransferQueue, as the v1 trainer and agent-loop workers use it; per module, so that
    no Ray outlives the module (later modules start their own, with logical GPUs: tests/ray, tests/vllm)."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"total_storage_size": 2000, "num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_model, chat_tokenizer):
    """The tiny model and tokenizer saved as a Hugging Face folder, for configs that load a model path."""
    folder = tmp_path_factory.mktemp("tiny-qwen2")
    tiny_model.save_pretrained(folder)
    chat_tokenizer.save_pretrained(folder)
    return folder


def mediq_case(i: int) -> dict:
    """A project-written MediQ case (gold B, pneumonia) in the public file's format."""
    findings = ["a productive cough", "a fever of 39 C", "crackles over the right lower lobe", "no recent travel"]
    return {
        "id": i,
        "question": "Which of the following is the most likely diagnosis?",
        "context": [f"A {30 + i}-year-old man comes to the clinic.", "He has been unwell for three days."],
        "options": {"A": "Asthma", "B": "Pneumonia", "C": "Bronchitis", "D": "Tuberculosis"},
        "answer_idx": "B",
        "facts": [f"Patient is a {30 + i}-year-old man."] + [f"He has {f}." for f in findings],
    }


@pytest.fixture(scope="session")
def mediq_source(tmp_path_factory):
    """A MediQ jsonl of 40 project-written cases, enough for arew prepare's default-sized small splits."""
    path = tmp_path_factory.mktemp("mediq-source") / "cases.jsonl"
    path.write_text("\n".join(json.dumps(mediq_case(i)) for i in range(40)) + "\n")
    return path
