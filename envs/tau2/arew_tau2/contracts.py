"""The ``contracts`` source: tau2 telecom's tool interface as micro-contracts mined from successful trajectories.

A micro-contract is a small, reusable check at the tool interface that says *what must hold* of a call
without prescribing the plan around it. Five kinds, each mined per setting (``solo``: the agent's tool
calls, company and phone; ``dual``: the agent's company-side calls; the customer's phone calls are not
the agent's and are left out):

- ``required_arguments``: the argument names every successful call of a tool gave;
- ``options``: the values an argument took, for categorical arguments only (booleans and lower-case
  tokens such as ``4g_5g_preferred``, at most :data:`MAX_OPTIONS` of them; ids, phone numbers, amounts and
  free text are never options);
- ``precondition``: read X ran before write Y in every successful trajectory that calls Y (diagnose
  before repairing, look the customer up before changing the account);
- ``no_repeat``: no successful trajectory made the same call (name and arguments) twice;
- ``grounded``: an id-like argument's value (not an option, not a number) had been shown to the agent
  before the call, in the ticket, a tool's output or the customer's words: ids are looked up, not guessed.

A contract's ``support`` is the number of successful trajectories that exercised it; every one of them
kept it (mining is strict: one successful trajectory that breaks a candidate removes it). The shipped
file (``data/tau2_contracts.json``) is mined from the audit's oracle policies (:mod:`arew_tau2.audit`) on
tau2's train split, solo and dual, the episodes that reached the official reward:
``python -m arew_tau2.contract_mining mine --out envs/tau2/arew_tau2/data/tau2_contracts.json``.

**The source.** Each decision's call is read with the environment's own parser (the ``<interact>``
payload, :func:`arew_tau2.tools.parse_tool_call`, as :class:`arew_tau2.env.Tau2Env` reads it).
A call that breaks a contract gets -1 with a reason naming it; every other decision gets 0: messages to
the customer, answers, unreadable text (the rules already punish malformed calls) and calls that keep
every contract. With ``reward_compliance`` a write that keeps every contract, has a mined precondition
and that the environment's rule credited (+1: it newly matched one of the task's expected actions) gets
+1, so the source's +1 are a subset of the rules' and no +1 is earned without doing the task. A
contract only checks the interface: a task can be solved while breaking one (a repair without its
diagnosis still repairs), and kept contracts do not solve it (``benchmarks/contract_study.py`` measures
how well a broken contract predicts failure on the held-out tasks). The source replaces the rules'
labels under ``combine: replace``; ``combine: fill`` keeps the rules' and adds the contracts' -1 where
the rules said 0.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from arew.critiques.base import CritiqueSource, Decision, EpisodeContext, SourceCritique
from arew.envs import parsing
from arew.schema import setting
from arew_tau2 import DUAL, SOLO, prompts
from arew_tau2.tools import ToolRequest, looks_like_tool_call, parse_tool_call

KINDS = ("required_arguments", "options", "precondition", "no_repeat", "grounded")
SETTINGS = {SOLO: "solo", DUAL: "dual"}  # task name -> the contracts' setting
ACTING_KINDS = ("write", "generic")  # tau2's tool kinds whose calls change something (a transfer is "generic")
MAX_OPTIONS = 5
MINED_MIN_SUPPORT = 3  # the shipped file keeps contracts with this support; the source's min_support raises it
SHIPPED = "data/tau2_contracts.json"
MINE_COMMAND = "python -m arew_tau2.contract_mining mine --out envs/tau2/arew_tau2/data/tau2_contracts.json"
MINED_FROM = "the audit's oracle policies (arew_tau2.audit) on tau2's train split, solo and dual; episodes with official reward 1"
REASON_CONTRACTS = 2  # a reason quotes this many broken contracts

_TOKEN = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


# ---- trajectories as the contracts see them ------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One decision: its tool call (None: a message, an answer, unreadable text), whether tau2 ran the call
    without error (the reply is the tool's output), and the text the agent was shown after it."""

    call: ToolRequest | None
    ran: bool = False
    reply: str = ""


@dataclass(frozen=True)
class Trajectory:
    """An episode's steps in one setting (``solo`` or ``dual``); ``opening`` is what the agent was shown
    before its first decision besides the system prompt (the ticket)."""

    setting: str
    steps: tuple[Step, ...]
    opening: str = ""


def tool_call(text: Any, solo: bool) -> ToolRequest | None:
    """The call in a decision's text as the environment reads it (:meth:`Tau2Env.act`), or None."""
    payload = parsing.extract_payload(text, "interact")
    if not payload.ok or not (solo or looks_like_tool_call(payload.value)):
        return None
    request = parse_tool_call(payload.value)
    return request.value if request.ok else None


def _step(decision: Decision, solo: bool) -> Step:
    call = tool_call(decision.text, solo)
    reply = decision.reply if isinstance(decision.reply, str) else ""
    ran = call is not None and reply.startswith(prompts.tool_output(call.name, "", False))
    return Step(call, ran, reply)


def trajectory_of(episode: EpisodeContext) -> Trajectory:
    """The contracts' view of a tau2 episode (``episode.task`` is ``tau2-solo`` or ``tau2-dual``)."""
    solo = episode.task == SOLO
    opening = [m.get("content") for m in episode.messages if isinstance(m, Mapping) and m.get("role") != "system"]
    return Trajectory(
        SETTINGS[episode.task],
        tuple(_step(decision, solo) for decision in episode.decisions),
        "\n".join(text for text in opening if isinstance(text, str)),
    )


@dataclass
class _Seen:
    """What had happened before a step: the tools that ran, the calls that ran, the texts shown (alphanumerics only)."""

    ran_tools: set[str] = field(default_factory=set)
    ran_calls: set[str] = field(default_factory=set)
    shown: list[str] = field(default_factory=list)

    def was_shown(self, value: Any) -> bool:
        plain = _plain(str(value))
        return bool(plain) and any(plain in text for text in self.shown)


def _walk(trajectory: Trajectory) -> Iterator[tuple[Step, _Seen]]:
    """Each step with what had happened before it."""
    seen = _Seen(shown=[_plain(trajectory.opening)])
    for step in trajectory.steps:
        yield step, seen
        if step.ran and step.call is not None:
            seen.ran_tools.add(step.call.name)
            seen.ran_calls.add(step.call.key)
        seen.shown.append(_plain(step.reply))


def _plain(text: str) -> str:
    """Lower-case letters and digits only: ``555 123 2002`` shows ``555-123-2002``."""
    return _NOT_ALNUM.sub("", text.lower())


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def is_categorical(value: Any) -> bool:
    """A value that names an option (a boolean, a lower-case token with a letter), not an id, a number or text."""
    if isinstance(value, bool):
        return True
    return isinstance(value, str) and bool(_TOKEN.fullmatch(value)) and any(ch.isalpha() for ch in value)


# ---- contracts -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Contract:
    """One contract of a setting about one tool; the fields a kind does not use stay empty."""

    setting: str
    kind: str
    tool: str
    arguments: tuple[str, ...] = ()  # required_arguments: the names
    argument: str = ""  # options, grounded: the argument
    values: tuple[Any, ...] = ()  # options: the values seen
    after: str = ""  # precondition: the read that must have run before
    support: int = 0
    why: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.setting not in SETTINGS.values():
            raise ValueError(f"a contract's kind is one of {KINDS} and its setting one of {sorted(SETTINGS.values())}: {self}")

    @property
    def identity(self) -> tuple[str, ...]:
        return (self.setting, self.kind, self.tool, self.argument, self.after)

    def as_json(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self) if (v := getattr(self, f.name)) not in ("", ())}

    def holds(self, call: ToolRequest, seen: _Seen) -> bool:
        """Whether ``call`` (of this contract's tool) keeps the contract, given what had happened before it."""
        if self.kind == "required_arguments":
            return set(self.arguments) <= set(call.arguments)
        if self.kind == "precondition":
            return self.after in seen.ran_tools
        if self.kind == "no_repeat":
            return call.key not in seen.ran_calls
        if self.argument not in call.arguments:
            return True
        value = call.arguments[self.argument]
        if self.kind == "options":
            return _canonical(value) in {_canonical(v) for v in self.values}
        return seen.was_shown(value)


@dataclass(frozen=True)
class ContractSet:
    """Contracts and where they were mined: successful trajectories per setting, the support they needed."""

    contracts: tuple[Contract, ...]
    trajectories: Mapping[str, int] = field(default_factory=dict)
    min_support: int = 1
    mined_from: str = ""

    def select(self, setting_name: str, min_support: int) -> dict[str, list[Contract]]:
        """The setting's contracts with at least ``min_support``, by tool."""
        by_tool: dict[str, list[Contract]] = defaultdict(list)
        for contract in self.contracts:
            if contract.setting == setting_name and contract.support >= min_support:
                by_tool[contract.tool].append(contract)
        return dict(by_tool)


def broken_contracts(trajectory: Trajectory, by_tool: Mapping[str, list[Contract]]) -> list[list[Contract]]:
    """Per step, the contracts its call breaks (empty for a step without a call)."""
    return [
        [c for c in by_tool.get(step.call.name, ()) if not c.holds(step.call, seen)] if step.call is not None else []
        for step, seen in _walk(trajectory)
    ]


# ---- mining --------------------------------------------------------------------------------------
def _tool_kinds() -> dict[str, str]:
    """tau2's kind of every tool ("read", "write", "generic"); imports tau2 (the source itself never needs it)."""
    from arew_tau2.runtime import runtime

    rt = runtime()
    return {name: spec.kind for name, spec in {**rt.agent_tools, **rt.user_tools}.items()}


@dataclass
class _Evidence:
    """What the successful trajectories of one setting showed, per tool (sets of trajectory indices are supports)."""

    calls: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    names: dict[str, set[str]] = field(default_factory=dict)  # tool -> names every call gave
    values: dict[tuple[str, str], list[Any]] = field(default_factory=lambda: defaultdict(list))
    given: dict[tuple[str, str], set[int]] = field(default_factory=lambda: defaultdict(set))
    ungrounded: set[tuple[str, str]] = field(default_factory=set)
    reads_before: dict[str, set[str]] = field(default_factory=dict)  # acting tool -> reads that always ran before
    repeated: set[str] = field(default_factory=set)

    def add(self, index: int, trajectory: Trajectory, kinds: Mapping[str, str]) -> None:
        for step, seen in _walk(trajectory):
            call = step.call
            if call is None or not step.ran or call.name not in kinds:
                continue
            name = call.name
            self.calls[name].add(index)
            self.names[name] = self.names.get(name, set(call.arguments)) & set(call.arguments)
            if call.key in seen.ran_calls:
                self.repeated.add(name)
            if kinds[name] in ACTING_KINDS:
                reads = {tool for tool in seen.ran_tools if kinds.get(tool) == "read"}
                self.reads_before[name] = self.reads_before.get(name, reads) & reads
            for argument, value in call.arguments.items():
                self.values[(name, argument)].append(value)
                self.given[(name, argument)].add(index)
                if is_categorical(value) or not isinstance(value, str) or not seen.was_shown(value):
                    self.ungrounded.add((name, argument))

    def contracts(self, setting_name: str, min_support: int) -> list[Contract]:
        found: list[Contract] = []

        def keep(kind: str, tool: str, support: int, why: str, **fields: Any) -> None:
            if support >= min_support:
                found.append(Contract(setting_name, kind, tool, support=support, why=why, **fields))

        for tool, indices in self.calls.items():
            support = len(indices)
            if self.names[tool]:
                named = tuple(sorted(self.names[tool]))
                keep("required_arguments", tool, support, f"every successful {tool} call gave {', '.join(named)}", arguments=named)
            for read in sorted(self.reads_before.get(tool, ())):
                keep("precondition", tool, support, f"{read} ran before every successful {tool}", after=read)
            if tool not in self.repeated:
                keep("no_repeat", tool, support, f"no successful trajectory repeated an identical {tool} call")
        for (tool, argument), values in self.values.items():
            support = len(self.given[(tool, argument)])
            distinct = sorted({_canonical(v): v for v in values}.items())
            if all(is_categorical(v) for v in values) and len(distinct) <= MAX_OPTIONS:
                options = tuple(v for _, v in distinct)
                shown = ", ".join(json.dumps(v) for v in options)
                keep("options", tool, support, f"{tool}.{argument} was always one of {shown}", argument=argument, values=options)
            elif (tool, argument) not in self.ungrounded:
                keep("grounded", tool, support, f"{tool}.{argument} was always a value shown before the call", argument=argument)
        return found


def mine_contracts(trajectories: Iterable[Trajectory], min_support: int = MINED_MIN_SUPPORT, mined_from: str = "") -> ContractSet:
    """The contracts that every one of ``trajectories`` (all successful) keeps, with at least ``min_support``."""
    kinds = _tool_kinds()
    evidence: dict[str, _Evidence] = defaultdict(_Evidence)
    counts: dict[str, int] = defaultdict(int)
    for index, trajectory in enumerate(trajectories):
        evidence[trajectory.setting].add(index, trajectory, kinds)
        counts[trajectory.setting] += 1
    found = [c for name, e in evidence.items() for c in e.contracts(name, min_support)]
    return ContractSet(tuple(sorted(found, key=lambda c: c.identity)), dict(sorted(counts.items())), min_support, mined_from)


# ---- the file ------------------------------------------------------------------------------------
def write(contracts: ContractSet, path: str | Path) -> None:
    """Readable JSON: a header, then one contract per line, sorted."""
    header = {
        "about": "tau2 telecom interface contracts (arew_tau2.contracts)",
        "command": MINE_COMMAND,
        "mined_from": contracts.mined_from,
        "trajectories": dict(contracts.trajectories),
        "min_support": contracts.min_support,
    }
    lines = ["{"] + [f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}," for key, value in header.items()]
    rows = [f"    {json.dumps(c.as_json())}" for c in sorted(contracts.contracts, key=lambda c: c.identity)]
    lines += ['  "contracts": [', ",\n".join(rows), "  ]", "}"]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _from_json(data: Mapping[str, Any]) -> ContractSet:
    contracts = tuple(Contract(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()}) for c in data["contracts"])
    return ContractSet(contracts, dict(data["trajectories"]), int(data["min_support"]), str(data.get("mined_from", "")))


@lru_cache(maxsize=8)
def load(path: str | None = None) -> ContractSet:
    """A contract file (None: the shipped one), read once per process."""
    if path is None:
        return _from_json(json.loads(resources.files("arew_tau2").joinpath(SHIPPED).read_text(encoding="utf-8")))
    return _from_json(json.loads(Path(path).read_text(encoding="utf-8")))


# ---- the source ----------------------------------------------------------------------------------
def _existing_file(path: str) -> str | None:
    return None if Path(path).is_file() else "name an existing contract file"


@dataclass(frozen=True)
class ContractConfig:
    """The ``contracts`` source's options."""

    path: str | None = setting(
        None, "A contract file written by python -m arew_tau2.contract_mining mine (null: the shipped one, mined on tau2's train split)",
        kind=str, nullable=True, rule=_existing_file,
    )  # fmt: skip
    min_support: int = setting(5, "Only contracts that at least this many successful trajectories kept are checked", low=1)
    reward_compliance: bool = setting(
        False,
        "+1 for a write that keeps every contract, has a mined precondition and that the rule credited (+1); false: -1 or 0 only",
    )


class ContractSource(CritiqueSource):
    """The ``contracts`` source (module docstring)."""

    CONFIG = ContractConfig

    @classmethod
    def check_task(cls, task: str) -> str | None:
        if task in SETTINGS:
            return None
        return f"the contracts are tau2 telecom's tool interface (tasks {', '.join(SETTINGS)})"

    async def critique(self, episode: EpisodeContext) -> list[SourceCritique]:
        if episode.task not in SETTINGS:
            return [SourceCritique(None, f"not a tau2 task: {str(episode.task)[:40]!r}") for _ in episode.decisions]
        setting_name = SETTINGS[episode.task]
        by_tool = load(self.config.path).select(setting_name, self.config.min_support)
        trajectory = trajectory_of(episode)
        critiques = []
        for step, decision, broken in zip(trajectory.steps, episode.decisions, broken_contracts(trajectory, by_tool)):
            if step.call is None:
                critiques.append(SourceCritique(0, "no tool call"))
                continue
            self.count("tool_calls")
            if broken:
                self.count("violations")
                quoted = "; ".join(c.why for c in broken[:REASON_CONTRACTS])
                more = f" (and {len(broken) - REASON_CONTRACTS} more)" if len(broken) > REASON_CONTRACTS else ""
                critiques.append(SourceCritique(-1, f"{step.call.name} breaks a contract: {quoted}{more}"))
                continue
            reads = [c.after for c in by_tool.get(step.call.name, ()) if c.kind == "precondition"]
            if self.config.reward_compliance and reads and decision.rule == 1:
                critiques.append(SourceCritique(1, f"{step.call.name} after {', '.join(reads)}, a needed write"))
            else:
                critiques.append(SourceCritique(0, f"{step.call.name} keeps its contracts"))
        return critiques
