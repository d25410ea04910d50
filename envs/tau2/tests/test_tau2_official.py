"""The official reward equals tau2's own evaluator on random episodes, solo and dual control.

``tau2.evaluator.evaluator`` imports litellm (through ``tau2.registry`` and the NL-assertion
evaluator). Without litellm, the two modules it needs only by name are replaced, for this
test only, by stand-ins: a registry whose telecom constructor is tau2's own
``get_environment`` (what ``tau2.registry`` maps "telecom" to) and an LLM module that is never
called (no telecom task has NL assertions). ``evaluate_simulation`` itself is tau2's code.
With litellm installed the real modules are used.

tau2's evaluator builds environments that use the class-wide ``default_vpn_details`` (the
leak that :mod:`arew_tau2.runtime` removes from episodes); it is reset to its pristine value
before each evaluation so that every evaluation sees what a fresh process would.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import random
import sys
import types

import pytest

from arew.envs.parsing import payload_kind
from arew_tau2.env import Tau2Env
from arew_tau2.runtime import PRISTINE_VPN_DETAILS, runtime
from arew_tau2.settings import Tau2Settings

APPS = ["messaging", "browser", "camera", "settings"]
PERMISSIONS = ["storage", "sms", "camera", "location", "network"]
GARBAGE = ["", "hello", "<interact>{}</interact>", "<interact>[1, 2]</interact>", '<interact>{"name": 3}</interact>', "<interact>```json\n{\"name\": \"nope\"}\n```</interact>"]


@pytest.fixture(scope="module")
def evaluate():
    """tau2's ``evaluate_simulation`` (with stand-ins for the litellm-bound modules when litellm is absent)."""
    saved = {name: sys.modules.get(name) for name in ("tau2.registry", "tau2.utils.llm_utils", "tau2.evaluator.evaluator")}
    if importlib.util.find_spec("litellm") is None:
        from tau2.domains.telecom.environment import get_environment

        registry = types.ModuleType("tau2.registry")
        registry.registry = types.SimpleNamespace(get_env_constructor=lambda domain: {"telecom": get_environment}[domain])
        llm = types.ModuleType("tau2.utils.llm_utils")
        llm.generate = lambda *a, **k: (_ for _ in ()).throw(AssertionError("no LLM in this test"))
        sys.modules["tau2.registry"] = registry
        sys.modules["tau2.utils.llm_utils"] = llm
        sys.modules.pop("tau2.evaluator.evaluator", None)
    module = importlib.import_module("tau2.evaluator.evaluator")
    from tau2.domains.telecom.user_tools import TelecomUserTools

    def official(env: Tau2Env) -> float:
        TelecomUserTools.default_vpn_details = PRISTINE_VPN_DETAILS.model_copy(deep=True)
        info = module.evaluate_simulation(env.simulation_run(), env.task, module.EvaluationType.ALL, env.solo, "telecom")
        return float(info.reward)

    yield official
    for name, mod in saved.items():
        if mod is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = mod
    TelecomUserTools.default_vpn_details = PRISTINE_VPN_DETAILS.model_copy(deep=True)


def _values(task) -> dict[str, list]:
    """Plausible argument values: those of the task's expected and initial actions, plus wrong ones."""
    pool: dict[str, list] = {}
    actions = [*(task.evaluation_criteria.actions or []), *(task.initial_state.initialization_actions or [])]
    for action in actions:
        for key, value in action.arguments.items():
            pool.setdefault(key, []).append(value)
    for key, wrong in (("customer_id", "C9999"), ("line_id", "L9999"), ("phone_number", "555-000-0000"), ("gb_amount", 1.5)):
        pool.setdefault(key, []).append(wrong)
    pool.setdefault("app_name", []).extend(APPS)
    pool.setdefault("permission", []).extend(PERMISSIONS)
    pool.setdefault("mode", []).extend(["4g_5g_preferred", "3g_only", "5g"])
    return pool


def _random_call(rng, specs, pool) -> str:
    spec = rng.choice(specs)
    arguments = {}
    for name, _type_text, required, _ in spec.params:
        if required or rng.random() < 0.3:
            choices = pool.get(name) or ["x", 1, True]
            arguments[name] = rng.choice(choices)
    return "<interact>" + json.dumps({"name": spec.name, "arguments": arguments}) + "</interact>"


def _expected(task, side=None) -> list:
    return [
        (a.name, a.arguments)
        for a in task.evaluation_criteria.actions or []
        if side is None or a.requestor == side
    ]


def _as_text(name, arguments) -> str:
    return "<interact>" + json.dumps({"name": name, "arguments": arguments}) + "</interact>"


def _solo_script(rng, task) -> list[str]:
    pool = _values(task)
    specs = list(runtime().tools_for(True).values())
    texts = [_random_call(rng, specs, pool) for _ in range(rng.randrange(0, 12))]
    texts += [rng.choice(GARBAGE) for _ in range(rng.randrange(0, 3))]
    if rng.random() < 0.6:
        texts += [_as_text(*a) for a in _expected(task)]
    if rng.random() < 0.5:
        rng.shuffle(texts)
    texts = texts[:29]
    texts.append("<answer>done</answer>" if rng.random() < 0.85 else "no answer here")
    return texts


async def _play(env: Tau2Env, texts) -> None:
    for text in texts:
        if payload_kind(text) == "answer" or text == texts[-1]:
            env.answer(text)
            return
        step = await env.act(text)
        if step.done:
            return


def test_official_reward_equals_tau2_evaluator_solo(base_tasks, evaluate):
    rng = random.Random(11)
    tasks = rng.sample(base_tasks, 24)
    rewards = []
    for k in range(48):
        task = tasks[k % len(tasks)]
        env = Tau2Env(task, "solo", settings=Tau2Settings(reward="official"))
        asyncio.run(_play(env, _solo_script(rng, task)))
        ours = env.official_reward()
        assert ours == evaluate(env), (task.id, k)
        if ours == 0.0:
            assert env.fractional_reward() < 1.0
        rewards.append(ours)
    assert 0 < sum(rewards) < len(rewards)  # both outcomes were tried


class _RandomCustomer:
    """Runs random phone calls (and sometimes the expected user-side ones), sometimes hangs up."""

    def __init__(self, rng, task):
        self.rng, self.task = rng, task
        self.pool = _values(task)
        self.specs = list(runtime().user_tools.values())
        self.repaired = False

    async def reply(self, agent_message, device):
        for _ in range(self.rng.randrange(0, 3)):
            text = _random_call(self.rng, self.specs, self.pool)
            body = json.loads(text[len("<interact>") : -len("</interact>")])
            device.call(body["name"], body["arguments"])
        if not self.repaired and self.rng.random() < 0.4:
            self.repaired = True
            for name, arguments in _expected(self.task, "user"):
                device.call(name, arguments)
        stop = self.rng.choice([None, None, None, "###STOP###", "###TRANSFER###"])

        class Turn:
            pass

        turn = Turn()
        turn.text, turn.stop, turn.source = "I am John Smith, 555-123-2002.", stop, "offline"
        return turn


def test_official_reward_equals_tau2_evaluator_dual(base_tasks, evaluate):
    rng = random.Random(5)
    tasks = rng.sample(base_tasks, 16)
    rewards = []
    specs = list(runtime().tools_for(False).values())
    for k in range(24):
        task = tasks[k % len(tasks)]
        env = Tau2Env(task, "dual", settings=Tau2Settings(reward="official"), customer=_RandomCustomer(rng, task))
        pool = _values(task)
        texts = []
        for _ in range(rng.randrange(1, 14)):
            roll = rng.random()
            texts.append("<interact>Please check your phone.</interact>" if roll < 0.5 else _random_call(rng, specs, pool))
        texts += [_as_text(*a) for a in _expected(task, "assistant")] if rng.random() < 0.7 else []
        texts.append("<answer>Goodbye.</answer>" if rng.random() < 0.8 else "bye")
        asyncio.run(_play(env, texts))
        ours = env.official_reward()
        assert ours == evaluate(env), (task.id, k, env.termination)
        rewards.append(ours)
    assert sum(rewards) > 0
