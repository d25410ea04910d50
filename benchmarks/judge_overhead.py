"""Requests and seconds the ``judge`` critique source adds to one training step's episodes.

    python benchmarks/judge_overhead.py [--tasks pe-g-s2,mediq] [--prompts 4] [--rollouts 2] [--turns 2]
        [--steps 2] [--endpoint URL --model NAME] [--mediq FILE.jsonl] [--publish]

A step is ``prompts`` rows of the task's train split, built by the task's own data preparation
(:func:`arew_preference.data.build_rows`; :func:`arew_mediq.data.build_rows` on the synthetic
cases of ``user_parse_rates.py``, or on ``--mediq FILE``), each played ``rollouts`` times, every episode
at once, through the episode driver (:func:`arew.episodes.play`) on the real environment (MediQ with its
offline patient); each step takes the next rows, as training does (a task with fewer rows than the steps
need, such as the 4 synthetic MediQ cases, plays its rows again with the next sessions). The agent is
scripted, so that it costs nothing and the judge is what is measured: fixed texts per round, ``turns``
questions each followed by an estimate, then the final answer (``2 * turns + 1`` decisions per
episode); the rollouts of a prompt ask the questions in other orders, as GRPO's samples differ.

Arms, each step played in all of them in turn, one step after another:

- ``none``: no critique source, the baseline (the environments and the driver alone);
- ``decision``: the judge with ``mode=decision``, one request per decision, an episode's sent together;
- ``decision, warm cache``: the same step again right after (GRPO's repeated prompts); the judge's cache
  keeps readable replies only, so a decision whose reply was unreadable is asked again;
- ``episode``: the judge with ``mode=episode``, one request per episode.

The judge's process-wide cache is emptied before each cold arm, so that a cold step is one the judge has
not seen. Per arm and step: decisions, the judge's requests (HTTP attempts), decisions answered from the
cache, unreadable replies (decisions without a readable label, of those the judge was asked about),
missing critiques (decisions that keep the rule's label: ``on_missing=rule``), failed requests (with the
client's retries, timeouts, connection and HTTP errors, malformed replies), and wall seconds; the table
shows counts per step and the median seconds over ``steps`` steps, with the seconds added over the
baseline's. The judge runs with its defaults (temperature 0, ``max_tokens`` 64 per decision, 64 requests
in flight) except ``timeout`` (``--timeout``).

Without ``--endpoint`` the script starts vLLM's OpenAI server on this machine's CPU with
SmolLM2-135M-Instruct (``benchmarks/vllm_cpu_server.py``; about a minute) and stops it at the end.
``--publish`` writes the table into docs/reference/benchmarks.md between its
``<!-- bench:judge-overhead:start -->`` and ``:end -->`` markers.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import os
import shlex
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from user_parse_rates import MEDIQ_CASES
from vllm_cpu_server import model_endpoint

from arew.critiques import judge
from arew.critiques.settings import CritiquePlan, CritiqueSettings
from arew.envs.registry import make_env
from arew.episodes import EpisodeCritiques, EpisodeLog, episode_name, episode_seed, play
from arew.reporting.markdown_blocks import replace_block
from arew.schema import parse_section
from arew_mediq import data as mediq_data
from arew_preference import data as preference_data

TASKS = ("pe-g-s2", "mediq")
PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:judge-overhead"
SEED = 0
TIMEOUT = 300.0  # seconds per request attempt: a CPU server queues a step's requests for longer than the judge's 30 s
TROUBLE = ("retries", "timeouts", "connection_errors", "http_errors", "parse_failures")  # the chat client's counters

# ---- the scripted agent -------------------------------------------------------------------------
# per task: questions (reasoning, the <interact> payload), the estimates written after each, and the answer
SCRIPTS = {
    "pe-g-s2": (
        [
            ("Movies 1 and 3 differ on action and drama.", "1, 3 | 1, 3"),
            ("Movie 7 is stronger on comedy, movie 9 on romance.", "7, 9 | 2, 4"),
            ("Sci-fi against horror between movies 2 and 4.", "2, 4 | 5, 6"),
            ("Drama against romance for movies 6 and 5.", "6, 5 | 3, 4"),
            ("Action against comedy for movies 10 and 8.", "10, 8 | 1, 2"),
            ("Horror against drama for movies 4 and 7.", "4, 7 | 6, 3"),
        ],
        ["0.6, 0.5, 0.4, 0.5, 0.5, 0.5", "0.6, 0.4, 0.4, 0.6, 0.5, 0.5", "0.6, 0.4, 0.4, 0.6, 0.6, 0.4"],
        "0.6, 0.4, 0.4, 0.6, 0.6, 0.4",
    ),
    "mediq": (
        [
            ("The fever pattern separates infection from the rest.", "Do you have a fever?"),
            ("The course narrows acute against chronic causes.", "How long have you had these symptoms?"),
            ("Medicines may explain the complaint.", "Do you take any regular medications?"),
            ("Smoking raises several of these options.", "Do you smoke?"),
            ("Travel points to infections acquired abroad.", "Have you travelled outside the country recently?"),
            ("A family history favours some options.", "Does anyone in your family have a similar illness?"),
        ],
        ["0.25, 0.35, 0.2, 0.2", "0.2, 0.45, 0.2, 0.15", "0.15, 0.55, 0.2, 0.1"],
        "0.15, 0.55, 0.2, 0.1",
    ),
}


def script(task: str, session: int, turns: int) -> list[str]:
    """The agent's texts for one episode: session ``session`` asks the questions starting at another one."""
    questions, estimates, answer = SCRIPTS[task]
    texts = []
    for turn in range(turns):
        why, question = questions[(session + turn) % len(questions)]
        estimate = estimates[min(turn, len(estimates) - 1)]
        texts += [f"<scratch>{why}</scratch>\n<interact>{question}</interact>", f"<scratch>Updating.</scratch>\n<interact>{estimate}</interact>"]
    return texts + [f"<scratch>Done asking.</scratch>\n<answer>{answer}</answer>"]


class ScriptedAgent:
    """The driver's transcript for fixed texts: every round fits, and the agent writes its next text
    whatever it was told, its counterfactual generations too."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def round_fits(self) -> bool:
        return True

    async def generate(self) -> str:
        return self.texts.pop(0)

    def add_feedback(self, text: str) -> bool:
        return True

    async def counterfactual_update(self, feedback: str) -> str:
        return self.texts[0]

    async def counterfactual_action(self, belief: str) -> str | None:
        return self.texts[0]


# ---- a step -------------------------------------------------------------------------------------
def task_rows(task: str, n: int, mediq: str | None) -> list[dict]:
    """Up to ``n`` rows' ``extra_info`` of the task's train split, from its own data preparation."""
    if task == "mediq":
        with tempfile.TemporaryDirectory() as tmp:
            source = mediq
            if source is None:
                source = Path(tmp) / "cases.jsonl"
                source.write_text("".join(json.dumps(case) + "\n" for case in MEDIQ_CASES))
            rows = mediq_data.build_rows(source, min(n, len(mediq_data.read_source(source))), 0, 0, SEED)["train"]
    else:
        rows = preference_data.build_rows(task, n, 0, 0, SEED)["train"]
    return [row["extra_info"] for row in rows]


def step_episodes(rows: list[dict], step: int, prompts: int, rollouts: int) -> list[tuple[dict, int]]:
    """(row, session) of each episode of step ``step``: its ``prompts`` rows (cycling through ``rows``), ``rollouts`` each."""
    first = step * prompts
    return [(rows[g % len(rows)], g // len(rows) * rollouts + r) for g in range(first, first + prompts) for r in range(rollouts)]


def judge_plan(task: str, url: str, model: str, mode: str, timeout: float) -> CritiquePlan:
    options = {"url": url, "model": model, "mode": mode, "timeout": timeout}
    return parse_section(CritiqueSettings, {"source": "judge", "options": options}, "arew_agent.critiques").for_task(task)


async def play_step(episodes: list[tuple[dict, int]], turns: int, plan: CritiquePlan | None) -> tuple[Counter, float]:
    """Every episode of the step at once; the step's counts and its wall seconds."""

    async def one(info: dict, session: int) -> EpisodeLog:
        name = episode_name(info, session)
        env = make_env(info["task"], info, episode_seed(name))
        critiques = None if plan is None else EpisodeCritiques(plan, info["task"], info, tuple(env.initial_messages()), name)
        log = EpisodeLog()
        await play(env, ScriptedAgent(script(info["task"], session, turns)), log, critiques=critiques)
        return log

    started = time.perf_counter()
    logs = await asyncio.gather(*(one(info, session) for info, session in episodes))
    seconds = time.perf_counter() - started
    counts: Counter = Counter()
    for log in logs:
        c = log.critique_counts
        counts.update(decisions=len(log.labels), requests=c.get("judge_requests", 0), cache_hits=c.get("judge_cache_hits", 0),
                      unreadable=c.get("judge_unreadable", 0), missing=c.get("missing", 0), failed=c.get("judge_request_failures", 0))  # fmt: skip
        counts.update({kind: c.get(f"judge_{kind}", 0) for kind in TROUBLE})
    return counts, seconds


# ---- the arms -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arm:
    name: str
    mode: str | None  # the judge's mode; None: no judge
    warm: bool = False  # the step the arm before played, again, with the cache it left


ARMS = (Arm("none", None), Arm("decision", "decision"), Arm("decision, warm cache", "decision", warm=True), Arm("episode", "episode"))


@dataclass
class ArmResult:
    task: str
    arm: str
    episodes: int
    steps: list[tuple[Counter, float]] = field(default_factory=list)

    def per_step(self, name: str) -> float:
        return sum(counts[name] for counts, _ in self.steps) / len(self.steps)

    @property
    def seconds(self) -> float:
        return statistics.median(seconds for _, seconds in self.steps)


async def measure(url: str, model: str, tasks, prompts: int, rollouts: int, turns: int, steps: int, timeout: float,
                  mediq: str | None = None) -> list[ArmResult]:  # fmt: skip
    """``steps`` steps of each task, each in every arm (see the module docstring)."""
    results = []
    for task in tasks:
        rows = task_rows(task, prompts * steps, mediq)
        arms = {arm.name: ArmResult(task, arm.name, prompts * rollouts) for arm in ARMS}
        for step in range(steps):
            episodes = step_episodes(rows, step, prompts, rollouts)
            for arm in ARMS:
                if arm.mode is not None and not arm.warm:
                    judge.clear_cache()  # a cold step: requests the judge has not seen
                plan = None if arm.mode is None else judge_plan(task, url, model, arm.mode, timeout)
                arms[arm.name].steps.append(await play_step(episodes, turns, plan))
        results += arms.values()
    return results


# ---- report -------------------------------------------------------------------------------------
def _number(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.1f}"


def table(results: list[ArmResult]) -> list[str]:
    steps = len(results[0].steps)
    lines = [
        f"| task | arm | episodes | decisions | judge requests | from the cache | unreadable (of asked) | missing critiques "
        f"| failed requests (retries, errors) | seconds per step (median of {steps}) | added seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    baseline = {r.task: r.seconds for r in results if r.arm == ARMS[0].name}
    for r in results:
        judged = r.arm != ARMS[0].name
        asked = r.per_step("decisions") - r.per_step("cache_hits")
        unreadable = r.per_step("unreadable")
        share = f"{_number(unreadable)} ({unreadable / asked:.0%})" if judged and asked else "-"
        cells = [_number(r.per_step(name)) if judged else "-" for name in ("requests", "cache_hits")]
        trouble = ", ".join(f"{kind.replace('_', ' ')} {_number(r.per_step(kind))}" for kind in TROUBLE if r.per_step(kind))
        failed = _number(r.per_step("failed")) + (f" ({trouble})" if trouble else "")
        after = [_number(r.per_step("missing")), failed] if judged else ["-", "-"]
        added = f"{r.seconds - baseline[r.task]:+.2f}" if judged else "-"
        lines.append(f"| {r.task} | {r.arm} | {r.episodes} | {_number(r.per_step('decisions'))} | {' | '.join(cells)} | {share} "
                     f"| {' | '.join(after)} | {r.seconds:.2f} | {added} |")  # fmt: skip
    return lines


def command(args) -> list[str]:
    """The command line that reproduces the run (files by name only: no machine's paths on the page)."""
    words = ["python", "benchmarks/judge_overhead.py", "--tasks", ",".join(args.tasks), "--prompts", str(args.prompts),
             "--rollouts", str(args.rollouts), "--turns", str(args.turns), "--steps", str(args.steps)]  # fmt: skip
    if args.timeout != TIMEOUT:
        words += ["--timeout", f"{args.timeout:g}"]
    if args.endpoint:
        words += ["--endpoint", "URL", "--model", args.model]
    if args.mediq:
        words += ["--mediq", Path(args.mediq).name]
    return words + ["--publish"]


def published(results: list[ArmResult], args, model: str) -> str:
    if args.endpoint:
        served = f"`{model}` at `--endpoint`"
    else:
        served = f"SmolLM2-135M-Instruct (`{model}`) on vLLM's CPU server (vllm-cpu {importlib.metadata.version('vllm-cpu')}, {os.cpu_count()} CPU cores)"
    head = (
        f"_judge {served}, temperature 0, timeout {args.timeout:g} s; a step of {args.prompts} prompts x {args.rollouts} "
        f"rollouts, a scripted agent of {args.turns} turns; written by `{shlex.join(command(args))}`_"
    )
    return "\n".join([head, "", *table(results)]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {list(TASKS)}")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--rollouts", type=int, default=2, help="episodes per prompt")
    parser.add_argument("--turns", type=int, default=2, help="the scripted agent's questions per episode before it answers")
    parser.add_argument("--steps", type=int, default=2, help="steps per arm, each with the next prompts (the seconds are their median)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="the judge's timeout per request attempt, seconds")
    parser.add_argument("--endpoint", help="base URL of a running OpenAI-compatible server (with --model); default: start vLLM")
    parser.add_argument("--model", help="served model name at --endpoint")
    parser.add_argument("--port", type=int, default=8766, help="port of the vLLM server this script starts")
    parser.add_argument("--mediq", help="a MediQ jsonl file (default: the synthetic cases of user_parse_rates.py)")
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--publish", action="store_true", help="write the table into docs/reference/benchmarks.md")
    args = parser.parse_args()
    if bool(args.endpoint) != bool(args.model):
        parser.error("--endpoint and --model go together")
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if set(args.tasks) - set(TASKS) or not args.tasks:
        parser.error(f"--tasks: of {list(TASKS)}")
    if not 1 <= args.turns <= len(SCRIPTS["mediq"][0]):
        parser.error(f"--turns: 1 to {len(SCRIPTS['mediq'][0])}")
    logging.getLogger("arew.critiques").setLevel(logging.ERROR)  # unreadable replies are counted in the table

    with model_endpoint(args.endpoint, args.model, args.port, args.startup_timeout) as (url, model):
        begun = time.perf_counter()
        results = asyncio.run(measure(url, model, args.tasks, args.prompts, args.rollouts, args.turns, args.steps, args.timeout, args.mediq))
        print(f"measured in {time.perf_counter() - begun:.0f} s")
    print("\n".join(table(results)))
    if args.publish:
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, published(results, args, model)))
        print(f"\nwrote the table into {PAGE.relative_to(PAGE.parents[2])}")


if __name__ == "__main__":
    main()
