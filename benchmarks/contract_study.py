"""Interface contracts on tau2's held-out tasks: does a broken contract predict a failed episode?

    python benchmarks/contract_study.py [--min-support N] [--publish]

The contracts (:mod:`arew_tau2.contracts`, the shipped file mined on tau2's train split) are
checked on episodes of tau2's test split (40 tasks, none seen in mining), solo and dual control
(the offline customer). The policies are the critique audit's (:mod:`arew_tau2.audit`): the oracle,
which reaches tau2's reward on every task, and each adversary; and perturbed oracles, to get
failures and successes that differ from the oracle by one change:

- ``oracle_drop_action``: one of the task's expected actions left out (a call, or in dual control the
  request for a phone repair), the one chosen from the task's id;
- ``oracle_no_diagnosis``: solo, the readings before the repairs left out (each repair before its
  diagnosis; the status bar and the final check stay); dual, the questions about the phone's readings;
- ``oracle_no_lookup``: the customer never looked up (company calls with ids nobody showed);
- ``oracle_lookup_first`` (dual): the lookup before the greeting, with a phone number the customer
  has not said yet;
- ``oracle_wrong_option`` (solo): the network mode set to ``4g_only``, which the tool accepts but no
  successful trajectory chose;
- ``oracle_missing_argument``: the first expected call that takes arguments made without its last one.

Each perturbed oracle plays only the tasks where it differs from the oracle.

Per episode: whether any decision broke a contract (the source's -1), whether the environment's
rules gave any -1, and whether it failed (official reward below 1). Reported per setting: failure
rates given a violation or none, the same for the rules' -1, and how well a violation predicts a
failure (precision = P(failure | violation), recall = P(violation | failure)); per decision: the
source's and the rules' -1 and where they agree, and the +1 the source gives with
``reward_compliance``; per policy: its violations by contract kind. ``--publish`` writes the tables
into docs/reference/benchmarks.md between its markers.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arew.audit.runner import TaskAudit, play_policy
from arew.critiques.base import Decision, EpisodeContext
from arew.envs.registry import make_env
from arew.reporting.markdown_blocks import replace_block
from arew_tau2 import DUAL, SOLO
from arew_tau2 import audit as oracles
from arew_tau2.contracts import (
    KINDS,
    SETTINGS,
    ContractConfig,
    ContractSource,
    broken_contracts,
    load,
    tool_call,
    trajectory_of,
)
from arew_tau2.tasks import build_splits

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:contract-study"
SHORT = {"required_arguments": "req", "options": "opt", "precondition": "pre", "no_repeat": "rep", "grounded": "grd"}


# ---- perturbed oracles ---------------------------------------------------------------------------
def _dropped(env: Any) -> tuple[str, str, dict[str, Any]]:
    """(requestor, name, arguments) of the expected action the task's id picks."""
    expected = env.task.evaluation_criteria.actions
    return _action(expected[zlib.crc32(env.task.id.encode()) % len(expected)])


def _without(texts: list[str], text: str) -> list[str]:
    index = texts.index(text)
    return texts[:index] + texts[index + 1 :]


def _name(text: str, solo: bool) -> str | None:
    """The tool a text calls (None: no call)."""
    return getattr(tool_call(text, solo), "name", None)


def _missing_argument(texts: list[str], env: Any, sides: tuple[str, ...]) -> list[str]:
    """``texts`` with the first expected call that takes arguments (of the agent's ``sides``) made without its last one."""
    for requestor, name, arguments in map(_action, env.task.evaluation_criteria.actions):
        if requestor in sides and arguments:
            shortened = dict(list(arguments.items())[:-1])
            return [oracles.call(name, shortened) if t == oracles.call(name, arguments) else t for t in texts]
    return texts


def _action(action: Any) -> tuple[str, str, dict[str, Any]]:
    return action.requestor, action.name, dict(action.arguments or {})


class SoloDropAction(oracles.SoloCompetent):
    def plan(self, env: Any) -> list[str]:
        _, name, arguments = _dropped(env)
        return _without(super().plan(env), oracles.call(name, arguments))


class SoloNoDiagnosis(oracles.SoloCompetent):
    def plan(self, env: Any) -> list[str]:
        texts = super().plan(env)
        diagnosis = set(oracles.DIAGNOSIS.values())
        first_repair = next(i for i, t in enumerate(texts) if _name(t, True) not in diagnosis | {"check_status_bar"})
        return [t for i, t in enumerate(texts) if i >= first_repair or _name(t, True) not in diagnosis]


class SoloNoLookup(oracles.SoloCompetent):
    def plan(self, env: Any) -> list[str]:
        return [t for t in super().plan(env) if _name(t, True) != "get_customer_by_phone"]


class SoloWrongOption(oracles.SoloCompetent):
    """The network mode set to one the tool accepts but no successful trajectory chose."""

    def plan(self, env: Any) -> list[str]:
        right = oracles.call("set_network_mode_preference", {"mode": "4g_5g_preferred"})
        wrong = oracles.call("set_network_mode_preference", {"mode": "4g_only"})
        return [wrong if t == right else t for t in super().plan(env)]


class SoloMissingArgument(oracles.SoloCompetent):
    def plan(self, env: Any) -> list[str]:
        return _missing_argument(super().plan(env), env, ("assistant", "user"))


class DualDropAction(oracles.DualCompetent):
    def plan(self, env: Any) -> list[str]:
        requestor, name, arguments = _dropped(env)
        text = oracles.call(name, arguments) if requestor == "assistant" else oracles.say(oracles.repair_request(name, arguments))
        return _without(super().plan(env), text)


class DualNoDiagnosis(oracles.DualCompetent):
    def plan(self, env: Any) -> list[str]:
        questions = {oracles.say(text) for tool, text in oracles.READ_REQUESTS.items() if tool != "check_status_bar"}
        return [t for t in super().plan(env) if t not in questions]


class DualNoLookup(oracles.DualCompetent):
    def plan(self, env: Any) -> list[str]:
        return [t for t in super().plan(env) if _name(t, False) != "get_customer_by_phone"]


class DualLookupFirst(oracles.DualCompetent):
    def plan(self, env: Any) -> list[str]:
        texts = super().plan(env)
        lookups = [t for t in texts if _name(t, False) == "get_customer_by_phone"]
        return lookups + [t for t in texts if t not in lookups]


class DualMissingArgument(oracles.DualCompetent):
    def plan(self, env: Any) -> list[str]:
        return _missing_argument(super().plan(env), env, ("assistant",))


# each played only on the tasks where it differs from the oracle
PERTURBED: dict[str, dict[str, type]] = {
    SOLO: {
        "oracle_drop_action": SoloDropAction,
        "oracle_no_diagnosis": SoloNoDiagnosis,
        "oracle_no_lookup": SoloNoLookup,
        "oracle_wrong_option": SoloWrongOption,
        "oracle_missing_argument": SoloMissingArgument,
    },
    DUAL: {
        "oracle_drop_action": DualDropAction,
        "oracle_no_diagnosis": DualNoDiagnosis,
        "oracle_no_lookup": DualNoLookup,
        "oracle_lookup_first": DualLookupFirst,
        "oracle_missing_argument": DualMissingArgument,
    },
}


def _differs(policy: type, oracle: Callable[[], Any], env: Any) -> bool:
    return policy().plan(env) != oracle().plan(env)


# ---- episodes ------------------------------------------------------------------------------------
@dataclass
class Tally:
    """One setting's (or one policy's) episodes and decisions."""

    episodes: int = 0
    failed: int = 0
    reward: float = 0.0
    outcomes: Counter = field(default_factory=Counter)  # (violation, rules' -1, failed) -> episodes
    decisions: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)  # contract kind -> decisions that broke one


async def episode(audit: TaskAudit, policy: Callable[[], Any], row: dict[str, Any], sources: dict[bool, ContractSource], by_tool) -> tuple:
    """(reward, the rules' labels, the source's labels without and with reward_compliance, the contracts each decision broke)."""
    reward, log = await play_policy(audit, policy(), row)
    decisions = tuple(Decision(*turn) for turn in zip(log.texts, log.channels, log.replies, log.labels))
    context = EpisodeContext(audit.task, row, tuple(make_env(audit.task, row, 0).initial_messages()), decisions)
    labels = {compliance: [c.label for c in await source.critique(context)] for compliance, source in sources.items()}
    broken = broken_contracts(trajectory_of(context), by_tool)
    return reward, log.labels, labels, broken


def study(task: str, min_support: int) -> dict[str, Tally]:
    """Every policy on the test split of ``task``: a tally per policy and one for the setting ("all")."""
    audit = next(a for a in oracles.AUDITS if a.task == task)
    rows = [{**row, "reward": "official"} for row in build_splits(task, "base")["test"]]
    policies = {"oracle": audit.competent, **audit.adversaries, **PERTURBED[task]}
    sources = {c: ContractSource(ContractConfig(min_support=min_support, reward_compliance=c), task) for c in (False, True)}
    by_tool = load().select(SETTINGS[task], min_support)
    tallies: dict[str, Tally] = defaultdict(Tally)
    for name, policy in policies.items():
        for row in rows:
            if name in PERTURBED[task] and not _differs(policy, audit.competent, make_env(task, row, 0)):
                continue
            reward, rules, labels, broken = asyncio.run(episode(audit, policy, row, sources, by_tool))
            if labels[False] != [-1 if b else 0 for b in broken]:
                raise AssertionError(f"{name} on {row['task_id']}: the source's labels are not the broken contracts")
            violated, ruled, failed = any(broken), -1 in rules, reward < 1.0
            for tally in (tallies[name], tallies["all"]):
                tally.episodes += 1
                tally.failed += failed
                tally.reward += reward
                tally.outcomes[(violated, ruled, failed)] += 1
                tally.decisions["decisions"] += len(rules)
                tally.decisions["contract -1"] += sum(bool(b) for b in broken)
                tally.decisions["rules -1"] += rules.count(-1)
                tally.decisions["both -1"] += sum(bool(b) and r == -1 for b, r in zip(broken, rules))
                tally.decisions["compliance +1"] += labels[True].count(1)
                tally.decisions["rules +1"] += rules.count(1)
                tally.kinds.update(kind for b in broken for kind in {c.kind for c in b})
    return dict(tallies)


# ---- tables --------------------------------------------------------------------------------------
def _rate(hits: int, total: int) -> str:
    return f"{hits / total:.2f} ({hits}/{total})" if total else "- (0/0)"


def _given(tally: Tally, index: int, flag: bool) -> str:
    """P(failure | the signal ``index`` (0 contracts, 1 rules) is ``flag``)."""
    cases = {key: n for key, n in tally.outcomes.items() if key[index] == flag}
    return _rate(sum(n for key, n in cases.items() if key[2]), sum(cases.values()))


def _recall(tally: Tally, index: int) -> str:
    failed = {key: n for key, n in tally.outcomes.items() if key[2]}
    return _rate(sum(n for key, n in failed.items() if key[index]), sum(failed.values()))


def tables(results: dict[str, dict[str, Tally]]) -> list[str]:
    lines = [
        "| setting | episodes | failure rate | P(fail \\| violation) = precision | P(fail \\| no violation) | recall of violation "
        "| P(fail \\| rules' -1) | P(fail \\| no rules' -1) | recall of rules' -1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, tallies in results.items():
        t = tallies["all"]
        lines.append(
            f"| {task} | {t.episodes} | {_rate(t.failed, t.episodes)} | {_given(t, 0, True)} | {_given(t, 0, False)} | {_recall(t, 0)} "
            f"| {_given(t, 1, True)} | {_given(t, 1, False)} | {_recall(t, 1)} |"
        )
    lines += [
        "",
        "| setting | decisions | contract -1 | rules' -1 | both -1 | contract -1 where the rules gave none | rules' +1 "
        "| contract +1 (reward_compliance) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task, tallies in results.items():
        d = tallies["all"].decisions
        lines.append(
            f"| {task} | {d['decisions']} | {d['contract -1']} | {d['rules -1']} | {d['both -1']} | {d['contract -1'] - d['both -1']} "
            f"| {d['rules +1']} | {d['compliance +1']} |"
        )
    kinds = " / ".join(SHORT[k] for k in KINDS)
    lines += [
        "",
        f"| setting | policy | episodes | mean reward | episodes with a violation | decisions breaking each kind ({kinds}) | rules' -1 "
        "| contract +1 (reward_compliance) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task, tallies in results.items():
        for name, t in tallies.items():
            if name == "all":
                continue
            violated = sum(n for key, n in t.outcomes.items() if key[0])
            by_kind = " / ".join(str(t.kinds[k]) for k in KINDS)
            lines.append(
                f"| {task} | {name} | {t.episodes} | {t.reward / t.episodes:.2f} | {violated} | {by_kind} "
                f"| {t.decisions['rules -1']} | {t.decisions['compliance +1']} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-support", type=int, default=ContractConfig().min_support, help="the source's min_support")
    parser.add_argument("--publish", action="store_true", help="write the tables into docs/reference/benchmarks.md")
    args = parser.parse_args()
    started = time.perf_counter()
    results = {task: study(task, args.min_support) for task in (SOLO, DUAL)}
    seconds = time.perf_counter() - started
    lines = tables(results)
    print("\n".join(lines))
    contracts = load()
    selected = sum(c.support >= args.min_support for c in contracts.contracts)
    print(f"\n{selected} of {len(contracts.contracts)} contracts (min_support {args.min_support}); {seconds:.0f} s")
    if args.publish:
        default = args.min_support == ContractConfig().min_support
        command = "python benchmarks/contract_study.py" + ("" if default else f" --min-support {args.min_support}")
        head = (
            f"_tau2's test split (40 tasks), offline customer; {selected} contracts (min_support {args.min_support}) of the shipped file, "
            f"mined on the train split; {platform.machine()}, {platform.python_version()}, {seconds:.0f} s; "
            f"written by `{command} --publish`_"
        )
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, "\n".join([head, "", *lines]) + "\n"))
        print(f"wrote the tables into {PAGE.relative_to(PAGE.parents[2])}")


if __name__ == "__main__":
    main()
