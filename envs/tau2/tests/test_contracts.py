"""tau2's interface contracts: mining, the shipped file, and the ``contracts`` source on real and garbage episodes."""

from __future__ import annotations

import asyncio
import json
import random
from importlib import resources

import pytest

from arew.audit.runner import play_policy
from arew.critiques.base import Decision, EpisodeContext
from arew.critiques.settings import CritiqueSettings
from arew.envs.registry import make_env
from arew.schema import ConfigError, parse_section
from arew_tau2 import DUAL, SOLO, prompts
from arew_tau2 import audit as oracles
from arew_tau2.contract_mining import main
from arew_tau2.contracts import (
    SHIPPED,
    ContractConfig,
    ContractSource,
    Step,
    Trajectory,
    load,
    mine_contracts,
    write,
)
from arew_tau2.tasks import build_splits
from arew_tau2.tools import ToolRequest

PHONE = "555-123-2002"
LOOKUP = '{"customer_id": "C1001", "line_ids": ["L1001", "L1002"]}'


def ran(name: str, output: str = "ok", **arguments) -> Step:
    return Step(ToolRequest(name, arguments), True, prompts.tool_output(name, output, False))


def kept(contracts, kind: str, tool: str, **fields) -> int | None:
    """The support of the one contract of that kind, tool and fields, or None."""
    found = [c for c in contracts if c.kind == kind and c.tool == tool and all(getattr(c, k) == v for k, v in fields.items())]
    assert len(found) <= 1
    return found[0].support if found else None


def test_mining_keeps_what_every_successful_trajectory_kept_with_its_support():
    first = Trajectory(
        "solo",
        (
            ran("check_status_bar"),
            ran("check_apn_settings"),
            ran("reset_apn_settings"),
            ran("get_customer_by_phone", LOOKUP, phone_number=PHONE),
            ran("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=2.0),
            ran("set_network_mode_preference", mode="4g_5g_preferred"),
        ),
        opening=f"Ticket: phone number {PHONE}",
    )
    second = Trajectory(
        "solo",
        (
            ran("check_status_bar"),
            ran("check_network_mode_preference"),
            ran("set_network_mode_preference", mode="3g_only"),
            Step(ToolRequest("reset_apn_settings", {}), False, "Your turn was invalid"),  # never ran: not evidence
            ran("check_apn_settings"),
            ran("reset_apn_settings"),
            ran("check_status_bar"),
            ran("refuel_data", customer_id="C1001", line_id="L1002", gb_amount=1.0),  # ids nobody showed
        ),
    )
    other = Trajectory("dual", (ran("get_customer_by_phone", LOOKUP, phone_number=PHONE),), opening=f"Customer: {PHONE}")
    mined = mine_contracts([first, second, other], min_support=1).contracts
    solo = [c for c in mined if c.setting == "solo"]
    assert kept(solo, "precondition", "reset_apn_settings", after="check_apn_settings") == 2
    assert kept(solo, "precondition", "reset_apn_settings", after="check_status_bar") == 2
    assert kept(solo, "precondition", "set_network_mode_preference", after="check_status_bar") == 2
    assert kept(solo, "precondition", "set_network_mode_preference", after="check_network_mode_preference") is None
    assert kept(solo, "precondition", "refuel_data", after="get_customer_by_phone") is None  # the second skipped it
    assert kept(solo, "options", "set_network_mode_preference", argument="mode", values=("3g_only", "4g_5g_preferred")) == 2
    assert kept(solo, "required_arguments", "refuel_data", arguments=("customer_id", "gb_amount", "line_id")) == 2
    assert kept(solo, "options", "refuel_data", argument="gb_amount") is None  # amounts are no options
    assert kept(solo, "options", "refuel_data", argument="customer_id") is None  # nor are ids
    assert kept(solo, "grounded", "get_customer_by_phone", argument="phone_number") == 1  # from the ticket
    assert kept(solo, "grounded", "refuel_data", argument="customer_id") is None
    assert kept(solo, "no_repeat", "check_apn_settings") == 2
    assert kept(solo, "no_repeat", "check_status_bar") is None  # the second read it twice
    dual = [c for c in mined if c.setting == "dual"]  # each setting's own contracts
    assert sorted(c.kind for c in dual) == ["grounded", "no_repeat", "required_arguments"]
    assert {c.tool for c in dual} == {"get_customer_by_phone"} and {c.support for c in dual} == {1}
    at_two = mine_contracts([first, second, other], min_support=2).contracts
    assert all(c.support >= 2 for c in at_two) and kept(at_two, "no_repeat", "check_apn_settings") == 2


def test_the_contract_file_reads_back_as_written(tmp_path):
    contracts = load()
    write(contracts, tmp_path / "copy.json")
    assert load(str(tmp_path / "copy.json")) == contracts
    lines = (tmp_path / "copy.json").read_text().splitlines()
    assert sum('"support":' in line for line in lines) == len(contracts.contracts)  # one contract per line
    assert all('"why":' in line for line in lines if '"support":' in line)


def test_the_shipped_file_is_what_the_mine_command_writes_for_the_train_split(tmp_path, capsys):
    main(["mine", "--out", str(tmp_path / "mined.json")])
    shipped = json.loads(resources.files("arew_tau2").joinpath(SHIPPED).read_text(encoding="utf-8"))
    assert json.loads((tmp_path / "mined.json").read_text()) == shipped
    assert shipped["trajectories"] == {"dual": 74, "solo": 74}  # every train task, both settings, reached the reward
    assert "contracts" in capsys.readouterr().out


# ---- the source on played episodes ----------------------------------------------------------------
class Script:
    """A scripted agent: the texts in order, then the answer."""

    def __init__(self, texts):
        self.texts = list(texts)

    def __call__(self, view):
        return self.texts.pop(0) if self.texts and view.round != "answer" else oracles.ANSWER


def audit_of(task):
    return next(a for a in oracles.AUDITS if a.task == task)


def episode(task, row, policy) -> tuple[EpisodeContext, float]:
    reward, log = asyncio.run(play_policy(audit_of(task), policy, row))
    decisions = tuple(Decision(*turn) for turn in zip(log.texts, log.channels, log.replies, log.labels))
    return EpisodeContext(task, row, tuple(make_env(task, row, 0).initial_messages()), decisions), reward


def critique(context, **options):
    return asyncio.run(ContractSource(ContractConfig(**options), context.task).critique(context))


def held_out_rows(task, n=None):
    """Rows of tau2's test split, none of whose tasks the shipped contracts were mined on."""
    rows = [{**row, "reward": "official"} for row in build_splits(task, "base")["test"]]
    return rows[:n]


def test_a_write_before_its_read_an_unseen_option_and_a_missing_argument_get_minus_one():
    row = held_out_rows(SOLO, 1)[0]
    texts = [
        oracles.call("reset_apn_settings"),  # before check_apn_settings
        oracles.call("check_status_bar"),
        oracles.call("check_network_mode_preference"),
        oracles.call("set_network_mode_preference", {"mode": "2g_only"}),  # an option no success used
        oracles.call("get_customer_by_phone", {"phone_number": PHONE}),
        oracles.call("refuel_data", {"customer_id": "C1001", "line_id": "L1002"}),  # no gb_amount
        oracles.call("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0}),
    ]
    context, _ = episode(SOLO, row, Script(texts))
    labels = critique(context)
    assert [c.label for c in labels] == [-1, 0, 0, -1, 0, -1, 0, 0]  # the answer last
    assert "check_apn_settings ran before every successful reset_apn_settings" in labels[0].reason
    assert "set_network_mode_preference.mode" in labels[3].reason and "4g_5g_preferred" in labels[3].reason
    assert "gb_amount" in labels[5].reason
    assert labels[-1].reason == "no tool call"


def test_messages_answers_and_unreadable_calls_get_zero():
    row = held_out_rows(DUAL, 1)[0]
    texts = [
        oracles.say(oracles.GREETING),
        "<interact>{not json</interact>",  # a malformed call: the rules' business
        "no tags at all",
        oracles.call("toggle_airplane_mode"),  # a phone tool in dual control: no contract of the agent's
    ]
    context, _ = episode(DUAL, row, Script(texts))
    assert {c.label for c in critique(context)} == {0}


def test_grounding_and_repeats_are_contracts_of_their_own():
    row = held_out_rows(DUAL, 1)[0]
    lookup = oracles.call("get_customer_by_phone", {"phone_number": PHONE})
    refuel = oracles.call("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0})
    context, _ = episode(DUAL, row, Script([lookup, oracles.say(oracles.GREETING), refuel, refuel]))
    labels = critique(context)
    assert [c.label for c in labels[:4]] == [-1, 0, 0, -1]  # a number nobody had said; ids the lookup showed; a repeat
    assert "shown before" in labels[0].reason and "repeated" in labels[3].reason


@pytest.mark.parametrize("task", [SOLO, DUAL])
def test_the_oracle_is_never_punished_on_held_out_tasks(task):
    for row in held_out_rows(task):
        context, reward = episode(task, row, audit_of(task).competent())
        assert reward == 1.0
        assert all(c.label == 0 for c in critique(context)), row["task_id"]
        assert all(c.label >= 0 for c in critique(context, reward_compliance=True)), row["task_id"]


@pytest.mark.parametrize("task", [SOLO, DUAL])
def test_reward_compliance_pays_only_writes_the_rules_credited_and_no_adversary_out_earns_the_oracle(task):
    audit = audit_of(task)
    rows = held_out_rows(task, 8)

    def mean_label(make) -> float:
        labels = []
        for row in rows:
            context, _ = episode(task, row, make())
            for decision, c in zip(context.decisions, critique(context, reward_compliance=True)):
                assert c.label != 1 or decision.rule == 1
                labels.append(c.label)
        return sum(labels) / len(labels)

    oracle = mean_label(audit.competent)
    assert oracle > 0
    for name, make in audit.adversaries.items():
        assert mean_label(make) <= oracle, name


def test_options_choose_the_file_and_the_support():
    with pytest.raises(ConfigError, match="existing contract file"):
        parse_section(ContractConfig, {"path": "no/such/file.json"}, "options")
    row = held_out_rows(SOLO, 1)[0]
    context, _ = episode(SOLO, row, Script([oracles.call("reset_apn_settings")]))
    assert critique(context)[0].label == -1
    assert critique(context, min_support=10_000)[0].label == 0  # no contract has that much support


def test_only_tau2_tasks_can_be_critiqued():
    assert ContractSource.check_task(SOLO) is None and ContractSource.check_task(DUAL) is None
    assert "tau2" in ContractSource.check_task("mediq")
    settings = parse_section(CritiqueSettings, {"source": "contracts"}, "arew_agent.critiques")
    assert settings.for_task(SOLO).name == "contracts"
    with pytest.raises(ConfigError, match="cannot critique task 'mediq'"):
        settings.for_task("mediq")


FRAGMENTS = ['{"name": ', '"arguments": {', "}", "]", "[", '"refuel_data"', '"reset_apn_settings"', '"mode": "x"',
             "null", "true", "1e999", "NaN", "```json\n", "\n```", "<interact>", "</interact>", "<answer>", "\u2212",
             '"customer_id": ', '"C1001"', "\x00", "\ud800", ",", ":"]  # fmt: skip


def garbage(rng: random.Random):
    kind = rng.random()
    if kind < 0.1:
        return rng.choice([None, 3, 2.5, [], {}, b"bytes"])
    if kind < 0.4:
        return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(0, 80)))
    body = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(0, 12)))
    return f"<interact>{body}</interact>" if rng.random() < 0.7 else body


def test_garbage_never_raises():
    rng = random.Random(0)
    names = ["reset_apn_settings", "refuel_data", "set_network_mode_preference", "get_customer_by_phone", 7, None]
    for _ in range(600):
        decisions = []
        for _ in range(rng.randrange(0, 12)):
            if rng.random() < 0.3:  # a well-formed call with odd arguments
                arguments = {rng.choice(["mode", "customer_id", "gb_amount", "x"]): rng.choice([None, 1, "C1001", [1], {"a": 1}, True])}
                text = "<interact>" + json.dumps({"name": rng.choice(names), "arguments": arguments}) + "</interact>"
            else:
                text = garbage(rng)
            decisions.append(Decision(text, "as", rng.choice([None, garbage(rng), "Output of refuel_data: C1001"]), rng.choice([-1, 0, 1])))
        messages = tuple(rng.choice([{"role": "user", "content": garbage(rng)}, {"role": "system"}, {}]) for _ in range(2))
        context = EpisodeContext(rng.choice([SOLO, DUAL]), {"garbage": garbage(rng)}, messages, tuple(decisions))
        for compliance in (False, True):
            labels = critique(context, reward_compliance=compliance)
            assert len(labels) == len(decisions) and all(c.label in (-1, 0, 1) for c in labels)
