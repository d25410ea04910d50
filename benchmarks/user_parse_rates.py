"""Parse and fallback rates of the LLM-backed simulated users against a real model served by vLLM,
and how often the offline users do or reveal the same as the LLM ones on the same messages.

    python benchmarks/user_parse_rates.py [--requests 40] [--clients mediq,flodial,tau2]
        [--endpoint URL --model NAME] [--mediq FILE.jsonl] [--flodial FOLDER] [--user-max-tokens N] [--publish]

Three clients, each through its own code path, not a copy of it:

- **mediq**: the patient, :meth:`arew.envs.users.llm.LLMUser.reply` on a ``FactRequest`` built as
  :class:`arew_mediq.env.MediQEnv` builds it (the facts not known from the opening, at most 2
  per answer). Cases: a few written for this benchmark in the MediQ file format, run through
  :func:`arew_mediq.data.normalize_case`; or the cases of ``--mediq FILE`` (the public jsonl).
  Questions: per case, those of ``benchmarks/mediq_patient_matching.py`` (targeted ones, in a
  fact's own words, and history-taking ones, which often have no answer), taken in turn.
- **flodial**: the troubleshooting user, ``LLMUser.reply`` on a ``RowRequest`` built as
  :class:`arew_flodial.env.FloDialEnv` builds it (the gold fault's table of yes/no checks and
  the problem). Flowcharts: two written for this benchmark in the FloDial file format (each
  check with a reworded question), parsed by :func:`arew_flodial.flowchart.parse_flowchart`;
  or those of ``--flodial FOLDER`` (``knowledge-sources``; asked verbatim there). Questions
  alternate between a check of the table (one row is meant) and a check of the chart that is
  not on the table (NONE is meant).
- **tau2**: tau2-dual's LLM customer (:class:`arew_tau2.customer.LLMCustomer`) in real
  episodes (``make_env`` on tau2's test split, ``customer="llm"``): the scripted agent turns of
  ``benchmarks/tau2_env_speed.py`` (greeting, the agent's own tool calls, a plain request for
  the first expected phone action, a check request) with an identity and a yes/no question
  after the greeting. Only messages reach the customer; each message is one request here,
  whatever number of HTTP requests its tool calls take. SmolLM2's chat template leaves the
  ``tools`` out of the prompt, so with the default model the customer never calls a tool and
  vLLM's tool parser is not exercised; point ``--endpoint`` at a tool-calling model for that.

Without ``--endpoint`` the script starts vLLM's OpenAI server on this machine's CPU with
SmolLM2-135M-Instruct (``benchmarks/vllm_cpu_server.py``), with tool calling on (hermes parser) for
the customer, and stops it at the end; startup takes about a minute.

Per client: requests (replies asked for), parsed (replies taken from the model), parse failures
(model replies the client's parser rejected), fallbacks (replies not taken from the model: parse
failures, and requests that got no reply), their rates, and up to ``--examples`` raw replies of
each failure kind. Temperatures, ``max_tokens`` and prompts are the clients' defaults; only the
timeout is longer (``--timeout``), since a CPU server queues requests. Everything runs at
temperature 0 (repeated runs gave identical tables); ``--dump FILE`` keeps each request's raw
reply, outcome and the offline counterpart's answer (JSONL).

Agreement with the offline counterpart: every request is also put to the offline user in the same
state, and each reply the model gave (a parsed one: a fallback *is* the offline reply) is compared
with it by :func:`compare`, both taken as sets: MediQ, the facts revealed (the
:class:`~arew.envs.users.OfflineUser` on the same ``FactRequest``); FloDial, the row answered (on the
same ``RowRequest``; none for NONE); tau2, the turn's actions (:func:`turn_actions`): the device
calls that reached the phone, by name and arguments (order and repeats aside), and the stop token.
For tau2 the offline customer answering is a copy of the one the LLM customer keeps in step
(``OfflineCustomer.observe`` replays the LLM's calls into it each turn), run on a copy of the
episode (:func:`offline_counterpart`), so its calls change nothing the LLM customer sees. The
outcomes: the same (the same non-empty set, or both nothing: "cannot answer", NONE, a turn with no
call and no stop), partly the same (one a part of the other, or overlapping), only one side
revealing or acting, or nothing shared; and for tau2 whether the stop token is the same.
``--publish`` writes the table into docs/reference/benchmarks.md between its
``<!-- bench:user-agreement:start -->`` and ``:end -->`` markers.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import re
import shlex
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mediq_patient_matching import history_questions, targeted_questions
from tau2_env_speed import agent_turns
from vllm_cpu_server import model_endpoint

from arew.envs.users import FactRequest, LLMUser, LLMUserConfig, OfflineUser, RowRequest
from arew.reporting.markdown_blocks import replace_block
from arew_flodial.data import gold_faults
from arew_flodial.flowchart import load_flowcharts, parse_flowchart
from arew_mediq.data import normalize_case, read_source

MAX_FACTS = 2
TOOL_CALLING = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")  # for the customer
CLIENTS = ("mediq", "flodial", "tau2")
PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:user-agreement"

# ---- synthetic data, in the public files' formats ------------------------------------------------
MEDIQ_CASES = [
    {
        "id": "syn-1",
        "question": "Which of the following is the most likely diagnosis?",
        "context": ["A 34-year-old man comes to the emergency department with a cough and fever.", "He has been unwell for four days."],
        "options": {"A": "Asthma", "B": "Community-acquired pneumonia", "C": "Pulmonary embolism", "D": "Tuberculosis"},
        "answer_idx": "B",
        "facts": [
            "A 34-year-old man comes to the emergency department with a cough and fever.",
            "The cough has been productive of yellow sputum for four days.",
            "His temperature is 39.1 C and his pulse is 104/min.",
            "He smokes ten cigarettes a day.",
            "He has no history of travel outside the country.",
            "Crackles are heard over the right lower lung on auscultation.",
            "He takes no regular medications.",
            "He reports sharp right-sided chest pain when he breathes in.",
        ],
    },
    {
        "id": "syn-2",
        "question": "Which of the following is the most appropriate next step in management?",
        "context": ["A 58-year-old woman presents with crushing chest pain that started two hours ago.", "She is sweating."],
        "options": {"A": "Reassurance", "B": "Oral antacids", "C": "Electrocardiogram", "D": "Chest physiotherapy"},
        "answer_idx": "C",
        "facts": [
            "A 58-year-old woman presents with crushing chest pain that started two hours ago.",
            "The pain spreads to her left arm and jaw.",
            "She has had type 2 diabetes for ten years and takes metformin.",
            "Her father died of a heart attack at the age of 60.",
            "Her blood pressure is 150/95 mm Hg.",
            "She feels nauseated and vomited once.",
            "She has never smoked.",
            "She has no known drug allergies.",
        ],
    },
    {
        "id": "syn-3",
        "question": "Which of the following is the most likely cause of her symptoms?",
        "context": ["A 25-year-old woman comes to the clinic because of burning pain when urinating.", "It began two days ago."],
        "options": {"A": "Kidney stone", "B": "Cystitis", "C": "Vaginal candidiasis", "D": "Appendicitis"},
        "answer_idx": "B",
        "facts": [
            "A 25-year-old woman comes to the clinic because of burning pain when urinating.",
            "She needs to urinate much more often than usual.",
            "She has mild tenderness above the pubic bone.",
            "She has no fever.",
            "Her last menstrual period was two weeks ago.",
            "She is sexually active with one partner and uses condoms.",
            "She has no flank pain.",
            "A urine dipstick is positive for nitrites and leukocyte esterase.",
        ],
    },
    {
        "id": "syn-4",
        "question": "Which of the following is the most likely diagnosis?",
        "context": ["A 7-year-old boy is brought to the physician because of an itchy rash on both arms.", "His mother says it appeared a week ago."],
        "options": {"A": "Atopic dermatitis", "B": "Psoriasis", "C": "Scabies", "D": "Impetigo"},
        "answer_idx": "A",
        "facts": [
            "A 7-year-old boy is brought to the physician because of an itchy rash on both arms.",
            "The rash is red, dry and scaly in the creases of the elbows.",
            "He had similar rashes every winter since he was a baby.",
            "He has asthma and uses an inhaler when needed.",
            "His sister has hay fever.",
            "Nobody else in the house is itching.",
            "He sleeps poorly because of the itching.",
            "There are no blisters or crusts.",
        ],
    },
]


def _chart(name: str, problem: str, checks: list[tuple[str, str]], faults: list[str], edges: dict) -> tuple[dict, dict[str, str]]:
    """(a FloDial knowledge-source object, check text -> the same check reworded as a user might be asked it)."""
    nodes = {str(i): {"label": f"check {i}", "terminal": False, "utterance": text} for i, (text, _) in enumerate(checks, 1)}
    for j, text in enumerate(faults, len(checks) + 1):
        nodes[str(j)] = {"label": f"fault {j}", "terminal": True, "utterance": text}
    raw = {"name": name, "category": "synthetic", "problem_description": problem, "nodes": nodes, "edges": edges, "supporting_faqs": []}
    return raw, dict(checks)


# checks 1-4 (questions), faults 5-9: 1 -yes-> 2 -yes-> 3 -yes-> F5 / -no-> F6; 2 -no-> F7; 1 -no-> 4 -yes-> F8 / -no-> F9
_EDGES = {"1": {"yes": "2", "no": "4"}, "2": {"yes": "3", "no": "7"}, "3": {"yes": "5", "no": "6"}, "4": {"yes": "8", "no": "9"}}
FLODIAL_CHARTS = [
    _chart(
        "laptop-overheating",
        "My laptop gets very hot and sometimes switches itself off.",
        [
            ("Does the fan make any noise when the laptop is hot?", "When the laptop heats up, can you hear the fan running?"),
            ("Are the air vents on the side of the laptop free of dust?", "Have you looked whether dust is blocking the vents on the side?"),
            ("Does the laptop stay hot when it is idle?", "Is it still hot even when you are not running anything?"),
            ("Is the laptop usually placed on a bed or a cushion?", "Do you normally use it on a soft surface like a bed or a pillow?"),
        ],
        [
            "A background program is using the processor; close it in the task manager.",
            "The thermal paste has dried out; have it replaced by a technician.",
            "The vents are clogged; clean them with compressed air.",
            "Soft surfaces block the air intake; use the laptop on a hard, flat surface.",
            "The fan has failed; replace the cooling fan.",
        ],
        _EDGES,
    ),
    _chart(
        "printer-not-printing",
        "My printer does not print anything when I send a document.",
        [
            ("Is the power light of the printer on?", "Does any light come on at the front of the printer?"),
            ("Does the printer show up as online on the computer?", "Does your computer list the printer as online?"),
            ("Is there paper in the input tray?", "Have you checked that the paper tray has paper in it?"),
            ("Is the power cable firmly plugged into the wall socket?", "Is the plug pushed all the way into the wall outlet?"),
        ],
        [
            "A stuck job blocks the print queue; cancel all documents in the queue.",
            "The tray is empty; load paper into the input tray.",
            "The printer driver is missing; reinstall the driver from the maker's website.",
            "The power supply of the printer is broken; contact the maker for a repair.",
            "The cable is loose; plug the power cable in firmly.",
        ],
        _EDGES,
    ),
]
OFF_TOPIC = "Have you tried turning the screen brightness down?"

# ---- request lists --------------------------------------------------------------------------------
def mediq_requests(n: int, source: str | None) -> list[FactRequest]:
    cases = [normalize_case(r) for r in (read_source(source) if source else MEDIQ_CASES)]
    cases = [c for c in cases if c]
    per_case = []
    for n_case, case in enumerate(cases):
        facts = case["facts"]
        open_ids = [i for i in range(len(facts)) if i not in set(case["known_fact_ids"])]
        targeted = [q.text for q in targeted_questions(facts, open_ids)]
        history = [q.text for q in history_questions(facts, open_ids)]
        history = history[3 * n_case :] + history[: 3 * n_case]  # each case starts elsewhere in the list
        questions = [q for pair in zip(targeted, history[::3]) for q in pair] or history  # alternate the two families
        per_case.append([FactRequest(q, tuple(facts), tuple(open_ids), MAX_FACTS) for q in questions])
    out: list[FactRequest] = []
    k = 0
    while len(out) < n and any(k < len(r) for r in per_case):  # round-robin over cases
        out += [r[k] for r in per_case if k < len(r)]
        k += 1
    return out[:n]


def flodial_requests(n: int, folder: str | None) -> list[RowRequest]:
    if folder:
        charts, reworded = load_flowcharts(folder), {}
    else:
        charts = [parse_flowchart(raw) for raw, _ in FLODIAL_CHARTS]
        reworded = {k: v for _, words in FLODIAL_CHARTS for k, v in words.items()}
    golds = gold_faults(charts)
    out: list[RowRequest] = []
    round_ = 0
    while len(out) < n and round_ < 16:
        for g, gold in enumerate(golds):
            table = tuple(gold.chart.questions[node] for node, _ in gold.path)
            off_table = [q for node, q in gold.chart.questions.items() if q not in table] + [OFF_TOPIC]
            if round_ % 2 == 0:
                asked = table[(round_ // 2 + g) % len(table)]
                question = reworded.get(asked, asked)
            else:
                asked = off_table[(round_ // 2 + g) % len(off_table)]
                question = reworded.get(asked, asked)
            out.append(RowRequest(question, table, gold.chart.problem))
        round_ += 1
    return out[:n]


MAX_ACTION_REQUESTS = 1  # per episode: more tasks, each one shorter
TAU2_QUESTIONS = ("Could you tell me the phone number on your account?", "Are you currently travelling abroad?")


def tau2_scripts(n: int) -> list[tuple[dict, list[str]]]:
    """(row, agent turns) per episode of tau2's test split until the customer messages add up to ``n``."""
    from tau2.data_model.tasks import Task

    from arew_tau2.tasks import build_splits

    out, messages = [], 0
    for info in build_splits("tau2-dual")["test"]:
        if messages >= n:
            break
        scripted = agent_turns(Task.model_validate_json(info["task_json"]), False)
        turns = [text if text.startswith("<interact>") else f"<interact>{text}</interact>" for _, text in scripted]
        middle, requests = [], 0
        for turn in turns[1:-1]:  # the agent's tool calls, and at most MAX_ACTION_REQUESTS requests for phone actions
            if not _is_tool_turn(turn):
                requests += 1
                if requests > MAX_ACTION_REQUESTS:
                    continue
            middle.append(turn)
        turns = turns[:1] + [f"<interact>{q}</interact>" for q in TAU2_QUESTIONS] + middle + turns[-1:]
        out.append((info, turns))
        messages += sum(not _is_tool_turn(t) for t in turns)
    return out


def _is_tool_turn(turn: str) -> bool:
    return turn.removeprefix("<interact>").lstrip().startswith("{")


# ---- agreement with the offline counterpart -------------------------------------------------------
SAME, NOTHING, LLM_PART, OFFLINE_PART, OVERLAP, OFFLINE_ONLY, LLM_ONLY, DISJOINT = OUTCOMES = (
    "same", "both nothing", "LLM's a part of offline's", "offline's a part of LLM's", "overlap",
    "only offline", "only LLM", "nothing shared",
)  # fmt: skip
AGREE = (SAME, NOTHING)
PARTLY = (LLM_PART, OFFLINE_PART, OVERLAP)


def compare(llm: Iterable, offline: Iterable) -> str:
    """How the LLM's reply relates to the offline one, each as the set of what it reveals or does (one of :data:`OUTCOMES`)."""
    mine, theirs = set(llm), set(offline)
    if mine == theirs:
        return SAME if mine else NOTHING
    if not mine:
        return OFFLINE_ONLY
    if not theirs:
        return LLM_ONLY
    if mine < theirs:
        return LLM_PART
    if theirs < mine:
        return OFFLINE_PART
    return OVERLAP if mine & theirs else DISJOINT


def turn_actions(calls: Iterable[tuple[str, object]], stop: str | None) -> frozenset[str]:
    """A customer turn's actions: its device calls as ``name(arguments as sorted JSON)``, and its stop token if any."""
    actions = {f"{name}({json.dumps(arguments, sort_keys=True, default=str)})" for name, arguments in calls}
    return frozenset(actions | ({stop} if stop else set()))


class RecordingDevice:
    """A device that keeps every call that reaches it, as (name, arguments), and passes it on."""

    def __init__(self, device) -> None:
        self.device = device
        self.user_tools = getattr(device, "user_tools", None) or []
        self.calls: list[tuple[str, object]] = []

    def call(self, name: str, arguments: dict):
        self.calls.append((name, dict(arguments) if isinstance(arguments, dict) else arguments))
        return self.device.call(name, arguments)


def offline_counterpart(customer, message: str, device) -> tuple[list, str | None, str]:
    """(device calls, stop, text) of the offline customer's reply to ``message`` in the LLM customer's
    state: a copy of its offline customer (kept in step with the conversation) on a copy of the
    episode behind ``device`` (the customer left out of the copy); the originals are untouched."""
    twin = copy.deepcopy(customer.offline)
    phone = RecordingDevice(copy.deepcopy(device, {id(customer): None}))
    turn = twin.respond(message, phone)
    return phone.calls, turn.stop, turn.text


# ---- measuring ----------------------------------------------------------------------------------
@dataclass
class Tally:
    requests: int = 0
    parsed: int = 0
    parse_failures: int = 0
    fallbacks: int = 0
    agreement: Counter = field(default_factory=Counter)  # per parsed reply: its outcome against the offline reply
    same_stop: int = 0  # tau2: parsed replies with the offline reply's stop token (or both none)
    twin_checks: list[int] = field(default_factory=lambda: [0, 0])  # tau2: fallback turns, those equal to the counterpart's reply
    http_requests: int = 0
    seconds: float = 0.0
    completion_tokens: list[int] = field(default_factory=list)
    truncated: int = 0
    accepted: list[str] = field(default_factory=list)  # raw replies that were parsed
    failures: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    kinds: Counter = field(default_factory=Counter)
    dump: list[dict] = field(default_factory=list)  # every request: what was asked, the raw reply, the outcome

    def fail(self, kind: str, raw: str) -> None:
        self.kinds[kind] += 1
        self.failures[kind].append(raw)

    @property
    def agree(self) -> int:
        return sum(self.agreement[o] for o in AGREE)


def record(client) -> list:
    """Keep every reply the client's ``complete`` returns (the call itself is unchanged)."""
    replies: list = []
    original = client.complete

    async def complete(*args, **kwargs):
        reply = await original(*args, **kwargs)
        replies.append(reply)
        return reply

    client.complete = complete
    return replies


_KIND_NOISE = re.compile(r"\[[^\]]*\]|'[^']*\d[^']*'|\(\d+\)|\d+")


def kind_of(error: str | None) -> str:
    """A failure's kind: the parser's (or the client's) reason with its numbers and quotes removed."""
    text = error or "unknown"
    match = re.match(r"unparseable reply \((.*)\): ", text, re.S)
    reason = match.group(1) if match else text
    return " ".join(_KIND_NOISE.sub("#", reason).split())[:100]


async def run_users(requests: list, url: str, model: str, args, tally: Tally) -> None:
    options = {"url": url, "model": model, "timeout": args.timeout}
    if args.user_max_tokens:
        options["max_tokens"] = args.user_max_tokens
    offline = OfflineUser()
    gate = asyncio.Semaphore(args.concurrency)

    async def one(request) -> None:
        async with gate:
            user = LLMUser(LLMUserConfig(**options))
            replies = record(user.client)
            reply = await user.reply(request)
        tally.requests += 1
        tally.http_requests += user.stats.requests
        raw = replies[-1].text if replies else ""
        if replies:
            tally.completion_tokens.append(replies[-1].completion_tokens or 0)
            tally.truncated += replies[-1].finish_reason == "length"
        ids, offline_ids = [i + 1 for i in reply.ids], [i + 1 for i in offline.answer(request)]
        entry = {"question": request.question, "raw": raw, "source": reply.source, "ids": ids, "error": reply.error}
        entry["offline_ids"] = offline_ids
        tally.dump.append(entry)
        if reply.source == "llm":
            tally.parsed += 1
            tally.accepted.append(f"{raw} -> {ids}")
            entry["agreement"] = compare(ids, offline_ids)
            tally.agreement[entry["agreement"]] += 1
        else:
            tally.fail(kind_of(reply.error), raw if replies else f"(no reply: {reply.error})")
        tally.parse_failures += user.stats.parse_failures
        tally.fallbacks += user.stats.fallbacks

    await asyncio.gather(*(one(r) for r in requests))


async def run_customer(scripts: list, url: str, model: str, args, tally: Tally) -> None:
    from arew.envs.registry import make_env

    options = {"customer": "llm", "customer_url": url, "customer_model": model, "customer_timeout": args.timeout}
    gate = asyncio.Semaphore(args.concurrency)
    budget = [args.requests]

    async def episode(info: dict, turns: list[str]) -> None:
        async with gate:
            env = make_env(info["task"], info, info["seed"], max_turns=60, reward="official", **options)
            replies = record(env.customer.client)
            answered = record_turns(env.customer)  # (turn, its device calls, the offline reply's calls, stop and text)
            for turn in turns:
                if not _is_tool_turn(turn):
                    if budget[0] <= 0:
                        break
                    budget[0] -= 1
                before, heard = len(replies), len(answered)
                step = await env.act(turn)
                if len(answered) == heard:  # a tool call of the agent, or a turn the customer never saw
                    continue
                customer_turn, calls, offline_calls, offline_stop, offline_text = answered[-1]
                tally.requests += 1
                mine = replies[before:]
                tally.completion_tokens += [r.completion_tokens or 0 for r in mine]
                tally.truncated += sum(r.finish_reason == "length" for r in mine)
                raw = " | ".join(r.text or f"(tool calls: {[c.name for c in r.tool_calls]})" for r in mine) or "(no reply)"
                acted, offline_acted = turn_actions(calls, customer_turn.stop), turn_actions(offline_calls, offline_stop)
                outcome = {"source": customer_turn.source, "text": customer_turn.text, "error": customer_turn.error}
                offline = {"actions": sorted(acted), "offline_text": offline_text, "offline_actions": sorted(offline_acted)}
                tally.dump.append({"task": info.get("task_id"), "agent": turn, "raw": raw, **outcome, **offline})
                if customer_turn.source == "llm":
                    tally.parsed += 1
                    tally.accepted.append(raw)
                    tally.dump[-1]["agreement"] = compare(acted, offline_acted)
                    tally.agreement[tally.dump[-1]["agreement"]] += 1
                    tally.same_stop += customer_turn.stop == offline_stop
                else:
                    tally.fail(kind_of(customer_turn.error), raw)
                    # a fallback is the offline customer's own reply, in the same state: the counterpart's must equal it
                    tally.twin_checks[0] += 1
                    tally.twin_checks[1] += acted == offline_acted and customer_turn.text == offline_text
                if step.done:
                    break
            stats = env.customer.stats
            tally.parse_failures += stats.parse_failures
            tally.fallbacks += stats.fallbacks
            tally.http_requests += stats.requests

    await asyncio.gather(*(episode(info, turns) for info, turns in scripts))


def record_turns(customer) -> list:
    """Keep every turn the customer's ``reply`` returns, with the device calls it made, and the offline
    counterpart's reply to the same message in the same state (:func:`offline_counterpart`): tuples
    (turn, calls, offline calls, offline stop, offline text). The reply itself is unchanged."""
    turns: list = []
    original = customer.reply

    async def reply(message, device):
        offline = offline_counterpart(customer, message, device)
        phone = RecordingDevice(device)
        turn = await original(message, phone)
        turns.append((turn, phone.calls, *offline))
        return turn

    customer.reply = reply
    return turns


# ---- report ---------------------------------------------------------------------------------------
ENVIRONMENTS = {"mediq": "MediQ patient (facts)", "flodial": "FloDial user (row)", "tau2": "tau2-dual customer (calls, stop)"}


def _share(count: int, total: int) -> str:
    return f"{count} ({count / total:.0%})" if total else str(count)


def agreement_table(results: dict[str, Tally]) -> list[str]:
    """The agreement table: per client, the parse rates and the outcomes of its parsed replies against the offline ones."""
    lines = [
        "| environment | requests | parsed | fallbacks | agrees with offline (of parsed) | both nothing | partly the same (LLM's ⊂ offline's) "
        "| only offline reveals or acts | only LLM | nothing shared | same stop |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in results.items():
        a = t.agreement
        partly = f"{sum(a[o] for o in PARTLY)} ({a[LLM_PART]})"
        stop = _share(t.same_stop, t.parsed) if name == "tau2" else "-"
        lines.append(
            f"| {ENVIRONMENTS[name]} | {t.requests} | {_share(t.parsed, t.requests)} | {_share(t.fallbacks, t.requests)} "
            f"| {_share(t.agree, t.parsed)} | {a[NOTHING]} | {partly} | {a[OFFLINE_ONLY]} | {a[LLM_ONLY]} | {a[DISJOINT]} | {stop} |"
        )
    return lines


def report(results: dict[str, Tally], examples: int, parsed_examples: int) -> None:
    print("| client | requests | parsed | parse failures | fallbacks | parse rate | fallback rate | agrees with offline | HTTP requests | median completion tokens | cut by max_tokens | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, t in results.items():
        n = max(t.requests, 1)
        agree = f"{t.agree}/{t.parsed}"
        tokens = sorted(t.completion_tokens)
        median = tokens[len(tokens) // 2] if tokens else 0
        print(
            f"| {name} | {t.requests} | {t.parsed} | {t.parse_failures} | {t.fallbacks} | {t.parsed / n:.0%} | {t.fallbacks / n:.0%} "
            f"| {agree} | {t.http_requests} | {median} | {t.truncated} | {t.seconds:.0f} |"
        )
    print("\nagreement of the parsed replies with the offline counterpart's, on the same messages:\n")
    print("\n".join(agreement_table(results)))
    if "tau2" in results and results["tau2"].twin_checks[0]:
        checked, equal = results["tau2"].twin_checks
        print(f"tau2: the offline counterpart's reply equals the fallback's (the offline customer's own) in {equal} of {checked} turns")
    for name, t in results.items():
        if parsed_examples and t.accepted:
            print(f"\n{name}: parsed replies (the first {min(parsed_examples, len(t.accepted))})")
            for raw in t.accepted[:parsed_examples]:
                print(f"    {json.dumps(raw[:240])}")
        if not t.kinds:
            continue
        print(f"\n{name}: failure kinds")
        for kind, count in t.kinds.most_common():
            print(f"- {count} x {kind}")
            for raw in t.failures[kind][:examples]:
                print(f"    {json.dumps(raw[:240])}")


def published(results: dict[str, Tally], args, model: str) -> str:
    """The block for the docs page: the agreement table under a line naming the model, the data and the command."""
    command = ["python", "benchmarks/user_parse_rates.py", "--requests", str(args.requests)]
    if args.endpoint:
        command += ["--endpoint", "URL", "--model", model]
    for option in ("mediq", "flodial"):  # files by name only: no machine's paths on the page
        if getattr(args, option):
            command += [f"--{option}", Path(getattr(args, option)).name]
    if args.user_max_tokens:
        command += ["--user-max-tokens", str(args.user_max_tokens)]
    served = f"`{model}`" if args.endpoint else f"SmolLM2-135M-Instruct (`{model}`) on vLLM's CPU server"
    mediq = f"`{Path(args.mediq).name}`" if args.mediq else "the synthetic cases"
    flodial = f"`{Path(args.flodial).name}`" if args.flodial else "the synthetic charts"
    data = f"MediQ {mediq}, FloDial {flodial}, tau2-dual's test split"
    head = f"_model {served}, temperature 0; {data}; written by `{shlex.join(command + ['--publish'])}`_"
    return "\n".join([head, "", *agreement_table(results)]) + "\n"



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40, help="requests per client")
    parser.add_argument("--clients", default="mediq,flodial,tau2")
    parser.add_argument("--endpoint", help="base URL of a running OpenAI-compatible server (with --model); default: start vLLM")
    parser.add_argument("--model", help="served model name at --endpoint")
    parser.add_argument("--port", type=int, default=8765, help="port of the vLLM server this script starts")
    parser.add_argument("--mediq", help="a MediQ jsonl file (default: the cases written here)")
    parser.add_argument("--flodial", help="a FloDial folder of flowcharts (default: the charts written here)")
    parser.add_argument("--user-max-tokens", type=int, help="override the user's max_tokens (default: LLMUserConfig's)")
    parser.add_argument("--timeout", type=float, default=120.0, help="client timeout per attempt, seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="requests (tau2: episodes) in flight per client")
    parser.add_argument("--examples", type=int, default=3, help="raw replies shown per failure kind")
    parser.add_argument("--show-parsed", type=int, default=0, help="also show this many parsed raw replies per client")
    parser.add_argument("--dump", help="write every request's raw reply and outcome to this JSONL file")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--publish", action="store_true", help="write the agreement table into docs/reference/benchmarks.md")
    args = parser.parse_args()
    logging.getLogger("arew.envs").setLevel(logging.ERROR)  # each fallback is reported below, not logged as it happens
    if bool(args.endpoint) != bool(args.model):
        parser.error("--endpoint and --model go together")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}")
    if args.publish and sorted(clients) != sorted(CLIENTS):
        parser.error(f"--publish: the published table has all the clients {list(CLIENTS)}")

    started = time.perf_counter()
    work = {
        "mediq": lambda: mediq_requests(args.requests, args.mediq),
        "flodial": lambda: flodial_requests(args.requests, args.flodial),
        "tau2": lambda: tau2_scripts(args.requests),
    }
    inputs = {name: work[name]() for name in clients}  # before the server: a data error costs no startup
    results: dict[str, Tally] = {}
    with model_endpoint(args.endpoint, args.model, args.port, args.startup_timeout, TOOL_CALLING) as (url, model):
        for name in clients:
            tally = results[name] = Tally()
            begun = time.perf_counter()
            if name == "tau2":
                asyncio.run(run_customer(inputs[name], url, model, args, tally))
            else:
                asyncio.run(run_users(inputs[name], url, model, args, tally))
            tally.seconds = time.perf_counter() - begun
    user_tokens = args.user_max_tokens or LLMUserConfig.__dataclass_fields__["max_tokens"].default
    print(f"model {model}, user max_tokens {user_tokens}, wall {time.perf_counter() - started:.0f} s")
    report(results, args.examples, args.show_parsed)
    if args.publish:
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, published(results, args, model)))
        print(f"\nwrote the agreement table into {PAGE.relative_to(PAGE.parents[2])}")
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as out:
            for name, tally in results.items():
                for entry in tally.dump:
                    out.write(json.dumps({"client": name, **entry}) + "\n")


if __name__ == "__main__":
    main()
