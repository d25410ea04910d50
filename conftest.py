"""The suite's tiers and timing, and its shared fixtures (tests/ and each task package's tests under envs/): loopback
chat servers (tests/fakes.py), the offline tokenizer and tiny model (arew.engines.tiny_models), a local TransferQueue,
a MediQ file, the shared reference data."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from arew.engines.tiny_models import build_chat_tokenizer, build_tiny_model
from arew.verl_plugin import smoke
from fakes import FakeChatServer

# a test's tier is the first of these markers it carries, else "fast" (benchmarks/suite_times.py reads it
# from the JUnit report, where it is the property "tier")
SLOW_TIERS = ("vllm", "e2e", "ray", "browser", "lab")
TIERS = ("fast", *SLOW_TIERS)
TIER_ORDER = ("vllm", "e2e", "ray", "lab", "browser", "fast")  # the slowest first, as the suite runs them
# per main_ppo run a test (or the module fixture its set-up built) started: the run's start-up and shutdown seconds
START_UP_PROPERTY = "main_ppo_start_up_s"


def pytest_itemcollected(item):
    """Each test's tier, the first of :data:`SLOW_TIERS` among its markers, else fast (a test that uses the
    ``transfer_queue`` fixture starts Ray: it belongs to the ``ray`` tier)."""
    if "transfer_queue" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.ray)
    markers = {mark.name for mark in item.iter_markers()}
    item.user_properties.append(("tier", next((tier for tier in SLOW_TIERS if tier in markers), "fast")))


def pytest_collection_modifyitems(items):
    """The order the suite runs in: modules with a slower tier's tests first, each module's tests together and in
    their order. Under the README's ``-n 2`` (``--dist loadfile`` in pyproject.toml) a worker takes one module at a
    time, so a module's fixtures (a main_ppo run that many tests read) run once, and the long modules started first
    leave short ones, not a long one, for the end."""
    rank: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        rank[module] = min(rank.get(module, len(TIER_ORDER)), TIER_ORDER.index(dict(item.user_properties)["tier"]))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: collection order within a rank


_running: list[pytest.Item] = []  # the test whose set-up, call or tear-down is running in this process


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.fixture(scope="session", autouse=True)
def _record_main_ppo_start_up():
    """Each ``arew.verl_plugin.smoke.run`` (verl's main_ppo) records its start-up and shutdown seconds on the test that ran it,
    set-up included (a module fixture's run counts for the first test that needs it, as pytest counts its time)."""
    run = smoke.run

    def recorded(*args, **kwargs):
        result = run(*args, **kwargs)
        if _running:
            _running[-1].user_properties.append((START_UP_PROPERTY, round(result.start_up_seconds, 1)))
        return result

    smoke.run = recorded
    yield
    smoke.run = run


class TierTimes:
    """Seconds of tests per tier (set-up, call and tear-down, as pytest reports them; under xdist the controller
    receives every worker's reports) and the main_ppo runs among them, printed at the end of every run."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.seconds: Counter = Counter()
        self.tests: dict[str, Counter] = {tier: Counter() for tier in TIERS}
        self.start_ups: Counter = Counter()
        self.runs: Counter = Counter()

    def pytest_runtest_logreport(self, report) -> None:
        properties = dict(report.user_properties)
        tier = properties.get("tier", "fast")
        self.seconds[tier] += report.duration
        self.tests[tier][report.nodeid] += 1
        if report.when == "teardown":  # the properties a test gathered, counted once
            start_ups = [value for name, value in report.user_properties if name == START_UP_PROPERTY]
            self.start_ups[tier] += sum(start_ups)
            self.runs[tier] += len(start_ups)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not any(self.tests.values()):
            return
        wall = time.monotonic() - self.started
        terminalreporter.section("time per tier")
        terminalreporter.write_line(f"wall {wall:.0f} s; seconds of tests per tier (a test's set-up, call and tear-down):")
        for tier in TIERS:
            if self.tests[tier]:
                runs = f", {self.runs[tier]} main_ppo runs with {self.start_ups[tier]:.0f} s of start-up and shutdown" if self.runs[tier] else ""
                terminalreporter.write_line(f"  {tier:8s} {len(self.tests[tier]):5d} tests {self.seconds[tier]:7.0f} s{runs}")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), not an xdist worker
        config.pluginmanager.register(TierTimes(), "arew-tier-times")


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


@pytest.fixture
def real_data_dir() -> Path | None:
    """The shared reference data (env AREW_REAL_DATA, or a ``shared/data`` beside or inside the checkout)."""
    root = Path(__file__).resolve().parent
    for candidate in (os.environ.get("AREW_REAL_DATA"), root / "shared" / "data", root.parent / "shared" / "data"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None
