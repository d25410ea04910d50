"""verl's synchronous AReW trainer against its colocate_async mode, with a simulated patient whose replies take an uneven time.

    python benchmarks/async_throughput.py [--steps 4] [--modes arew,arew_colocate_async] [--seed 0]
        [--delay-mean 0.2] [--slow-share 0.1] [--slow-seconds 5] [--warmup-batches 1]
        [--response-length 2048] [--mediq-source FILE.jsonl] [--out runs/bench-async] [--publish]

The same MediQ task runs twice through verl's real ``main_ppo`` on the CPU backend (``arew smoke``:
:func:`arew.verl_plugin.smoke.run`, its sizes: 4 prompts x 2 rollouts per step), with the same seed and steps:
once with ``trainer.v1.trainer_mode=arew`` (synchronous: a step samples all its episodes, then
trains) and once with ``trainer.v1.trainer_mode=arew_colocate_async`` (verl's colocate_async trainer
with AReW's advantage stage: ``trainer.v1.colocate_async.num_warmup_batches`` batches more are in
flight, a step trains on the first groups that finish, the unfinished generations are aborted at the
end of sampling and resumed under the new weights, so a step does not wait for its slowest episode).

The agent is a scripted model (:func:`arew.engines.tiny_models.build_scripted_model`, its tokenizer trained
on the task's prompt) that asks ``Do you have a fever?`` in every turn, so every action round asks
the patient. The patient is the LLM user (``arew_agent.env_options.user=llm``) pointed at a loopback
OpenAI-compatible server of this script (:class:`PatientServer`), which answers as the patient
model is asked to: ``FACTS: n``, the offered fact sharing most content terms with the question
(:func:`arew.envs.lexical.terms`, with concept words), or ``FACTS: NONE`` when none shares one, so
every reply is parsed, none falls back. Each reply first waits a delay drawn by :class:`DelayModel`
from one ``random.Random(seed)`` stream in the order requests arrive: an exponential time of mean
``--delay-mean`` seconds plus, for a ``--slow-share`` of replies, ``--slow-seconds`` more (most
replies fast, a few slow: a step waits for its unluckiest episode). The user's client gets a
timeout longer than any delay and no retries, so a reply that did not come back would show as a
fallback.

Cases: ``--mediq-source FILE`` (the public MediQ jsonl), or by default 40 cases cycled from the 4
synthetic ones of ``user_parse_rates.py`` (distinct ids), enough for ``arew smoke``'s splits.

Per mode, over the steps after the first (the first starts the agent-loop workers): episodes per
second (trained episodes over the summed ``timing_s/step``), mean step and generation
(``timing_s/gen``) seconds, verl's trajectory staleness (``training/off_policy/trajectory_staleness``,
the mean of the steps' means and the largest max), AReW's decision staleness and the decisions
whose turns spanned a weight update (``arew/off_policy/...``, async only), and start-up overhead
(wall time minus all the steps); over the whole run, the user replies the server sent and their
delays, and the fallbacks of the trained episodes (``episode/proxy_user_fallbacks``). Then the ratio
async / sync of episodes per second and of step time, measured in the same run. ``--publish``
writes the table into docs/reference/benchmarks.md between ``<!-- bench:async-throughput:start -->``
and ``:end -->``, and a 3-row summary into README.md between ``<!-- bench:async-readme:start -->``
and ``:end -->``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import statistics
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from user_parse_rates import MEDIQ_CASES

from arew.envs.lexical import terms
from arew.envs.users import prompts
from arew.reporting.markdown_blocks import replace_block
from arew.verl_plugin import smoke

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "benchmarks.md"
README = ROOT / "README.md"
MARKER = "bench:async-throughput"
README_MARKER = "bench:async-readme"
SYNC, ASYNC = "arew", "arew_colocate_async"
MODES = (SYNC, ASYNC)
QUESTION = "<interact>Do you have a fever?</interact>"
N_CASES = 40  # arew smoke's splits: 32 train, 4 validation, 4 test
RUN_TIMEOUT = 1800.0  # seconds per main_ppo run: a hung run must not hang the benchmark

# smoke's sizes: prompts per step x rollouts per prompt, the trained episodes of a step
_SIZES = dict(o.split("=", 1) for o in smoke.SMOKE_OVERRIDES)
EPISODES_PER_STEP = int(_SIZES["data.train_batch_size"]) * int(_SIZES["actor_rollout_ref.rollout.n"])


# ---- the simulated patient's server -----------------------------------------------------------------
@dataclass(frozen=True)
class DelayModel:
    """Seconds before a reply: exponential with mean ``mean``, plus ``slow_seconds`` for a ``slow_share`` of replies."""

    mean: float = 0.2
    slow_share: float = 0.1
    slow_seconds: float = 5.0

    def draw(self, rng: random.Random) -> float:
        fast = rng.expovariate(1.0 / self.mean) if self.mean > 0 else 0.0
        return fast + (self.slow_seconds if rng.random() < self.slow_share else 0.0)

    def delays(self, seed: int, n: int) -> list[float]:
        """The first ``n`` delays of a server started with ``seed`` (its requests' order)."""
        rng = random.Random(seed)
        return [self.draw(rng) for _ in range(n)]

    def describe(self) -> str:
        return f"an exponential time of mean {self.mean:g} s, plus {self.slow_seconds:g} s for {self.slow_share:.0%} of replies"


_FACT_LINE = re.compile(r"^(\d+)\. (.*)$")


def patient_reply(messages: list[dict]) -> str | None:
    """The patient's line for a request of :func:`arew.envs.users.prompts.messages` (a ``FactRequest``): the offered
    fact that shares most content terms with the doctor's question (the lowest number on a tie), or NONE; None for
    a request that is not a patient's."""
    text = messages[-1].get("content", "") if messages else ""
    if "Facts:\n" not in text or "Doctor's question: " not in text:
        return None
    listed, question = text.split("Facts:\n", 1)[1].split("\n\nDoctor's question: ", 1)
    question = question.split("\n\n", 1)[0]
    asked = terms(question, expand=True)
    best, shared = None, 0
    for line in listed.splitlines():
        match = _FACT_LINE.match(line)
        if match:
            overlap = len(terms(match.group(2), expand=True) & asked)
            if overlap > shared:
                best, shared = int(match.group(1)), overlap
    return f"{prompts.FACT_LABEL}: {best if best is not None else 'NONE'}"


class PatientServer:
    """A loopback ``/v1/chat/completions`` endpoint (``http.server``, a thread per request) answering
    :func:`patient_reply` after a delay of ``delays`` drawn in arrival order from ``random.Random(seed)``.
    ``served`` keeps each reply's delay; ``unrecognised`` counts requests that were not a patient's
    (answered NONE), ``dropped`` replies whose client had gone (episodes still in flight when a run
    ends). A context manager: serving inside, stopped on exit."""

    def __init__(self, delays: DelayModel, seed: int):
        self.model, self.rng, self.lock = delays, random.Random(seed), threading.Lock()
        self.served: list[float] = []
        self.unrecognised = self.dropped = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle(self) -> None:
                try:
                    super().handle()
                except ConnectionResetError:  # a kept-alive connection that a stopped run closed: nothing to answer
                    pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": f"no route {self.path}"})
                    return
                messages = json.loads(body).get("messages", [])
                try:
                    self._send(200, owner.answer(messages))
                except (BrokenPipeError, ConnectionResetError):
                    with owner.lock:
                        owner.dropped += 1

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # quiet: thousands of requests
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, messages: list[dict]) -> dict:
        """The chat-completion body for one request, after its delay."""
        line = patient_reply(messages)
        with self.lock:
            wait = self.model.draw(self.rng)
            self.served.append(wait)
            self.unrecognised += line is None
        time.sleep(wait)
        text = line or f"{prompts.FACT_LABEL}: NONE"
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return {"object": "chat.completion", "model": "patient", "choices": [choice]}

    def __enter__(self) -> PatientServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# ---- the task and the agent -------------------------------------------------------------------------
def synthetic_cases(n: int = N_CASES) -> list[dict]:
    """``n`` MediQ records cycled from ``user_parse_rates.MEDIQ_CASES``, with distinct ids."""
    return [{**MEDIQ_CASES[i % len(MEDIQ_CASES)], "id": f"{MEDIQ_CASES[i % len(MEDIQ_CASES)]['id']}-{i:02d}"} for i in range(n)]


def mediq_source(out: Path, given: str | None) -> str:
    if given:
        return str(Path(given).resolve())
    path = out / "mediq-cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in synthetic_cases()))
    return str(path)


def scripted_agent(out: Path, source: str) -> Path:
    """The scripted model asking :data:`QUESTION` every turn, its tokenizer trained on the task's first prompt."""
    from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model

    folder = out / "scripted"
    if not (folder / "config.json").exists():
        smoke.prepare_data("mediq", out / "data", source)
        tokenizer = build_chat_tokenizer(extra_text=[*smoke.prompt_text("mediq", out / "data"), *[QUESTION] * 50])
        build_scripted_model(tokenizer, QUESTION).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def overrides(mode: str, url: str, args) -> list[str]:
    user = {"user_timeout": args.delays.slow_seconds + 20 * args.delays.mean + 60, "user_max_retries": 0}
    words = [
        "arew_agent.env_options.user=llm", f"arew_agent.env_options.user_url={url}",
        *(f"+arew_agent.env_options.{key}={value:g}" for key, value in user.items()),  # not in the task's config
        "data.max_prompt_length=4096", f"data.max_response_length={args.response_length}", f"data.seed={args.seed}",
        f"trainer.v1.trainer_mode={mode}",
    ]  # fmt: skip
    if mode == ASYNC:
        words.append(f"trainer.v1.colocate_async.num_warmup_batches={args.warmup_batches:g}")
    return words


# ---- one run and its numbers ------------------------------------------------------------------------
@dataclass
class ModeResult:
    mode: str
    steps: list[dict]
    wall_seconds: float
    delays: list[float] = field(default_factory=list)  # of every reply the server sent
    unrecognised: int = 0
    dropped: int = 0

    def summary(self) -> dict[str, float]:
        return summarize(self.steps, self.wall_seconds, self.delays)


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _max(values: list[float]) -> float:
    return max(values) if values else float("nan")


def trained_episodes(step: dict, default: int = EPISODES_PER_STEP) -> int:
    """The episodes a step trained on: its decisions over the decisions per episode, else ``default`` (smoke's batch)."""
    decisions, per_episode = step.get("arew/decisions"), step.get("episode/decisions/mean")
    return round(decisions / per_episode) if decisions and per_episode else default


def summarize(steps: list[dict], wall_seconds: float, delays: list[float], episodes_per_step: int = EPISODES_PER_STEP) -> dict[str, float]:
    """A run's numbers (see the module docstring) from verl's per-step metrics, its wall time and the served delays;
    a metric a step did not log is NaN."""
    measured = steps[1:]  # the first step starts the agent-loop workers

    def per_step(key: str) -> list[float]:
        return [float(step[key]) for step in measured if key in step]

    step_seconds = per_step("timing_s/step")
    episodes = sum(trained_episodes(step, episodes_per_step) for step in measured)
    fallbacks = sum(step.get("episode/proxy_user_fallbacks/mean", 0.0) * trained_episodes(step, episodes_per_step) for step in steps)
    return {
        "episodes_per_second": episodes / sum(step_seconds) if step_seconds else float("nan"),
        "step_seconds": _mean(step_seconds),
        "generation_seconds": _mean(per_step("timing_s/gen")),
        "trajectory_staleness_mean": _mean(per_step("training/off_policy/trajectory_staleness/mean")),
        "trajectory_staleness_max": _max(per_step("training/off_policy/trajectory_staleness/max")),
        "decision_staleness_mean": _mean(per_step("arew/off_policy/decision_staleness/mean")),
        "decision_staleness_max": _max(per_step("arew/off_policy/decision_staleness/max")),
        "spanning_decisions": _mean(per_step("arew/off_policy/spanning_decisions")),
        "decisions": _mean(per_step("arew/decisions")),
        "user_replies": float(len(delays)),
        "delay_mean": _mean(delays),
        "delay_max": _max(delays),
        "fallbacks": fallbacks,
        "startup_seconds": wall_seconds - sum(float(step.get("timing_s/step", 0.0)) for step in steps),
    }


def ratios(summaries: dict[str, dict[str, float]]) -> dict[str, float] | None:
    """async / sync of episodes per second and of step time, when both modes ran."""
    if SYNC not in summaries or ASYNC not in summaries:
        return None
    sync, fast = summaries[SYNC], summaries[ASYNC]
    return {key: fast[key] / sync[key] for key in ("episodes_per_second", "step_seconds")}


def run_mode(mode: str, args, source: str, model: Path) -> ModeResult:
    with PatientServer(args.delays, args.seed) as server:
        result = smoke.run(task="mediq", out=args.out / mode, steps=args.steps, overrides=overrides(mode, server.url, args),
                           model=model, source=source, timeout=RUN_TIMEOUT)  # fmt: skip
        delays, unrecognised, dropped = list(server.served), server.unrecognised, server.dropped
    if result.returncode != 0 or len(result.steps) < args.steps:
        raise SystemExit(f"{mode}: run failed (exit {result.returncode}, {len(result.steps)} steps), see {result.log_path}")
    return ModeResult(mode, result.steps, result.wall_seconds, delays, unrecognised, dropped)


# ---- report -----------------------------------------------------------------------------------------
def _cell(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # NaN: not logged


def _count(x: float) -> str:
    return f"{x:.0f}" if x == int(x) else f"{x:.1f}"


def _pair(a: float, b: float, digits: int = 2) -> str:
    return "-" if a != a else f"{_cell(a, digits)} / {_cell(b, digits)}"


HEADER = (
    "mode", "episodes / s", "step (s)", "generation per step (s)", "trajectory staleness mean / max",
    "decision staleness mean / max", "spanning decisions per step (of decisions)", "user replies",
    "reply delay mean / max (s)", "fallbacks", "start-up and shutdown (s)",
)  # fmt: skip


def table(summaries: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|---" * len(HEADER) + "|"]
    for mode, s in summaries.items():
        spanning = "-" if s["spanning_decisions"] != s["spanning_decisions"] else f"{_count(s['spanning_decisions'])} ({s['decisions']:.0f})"
        row = [
            f"`{mode}`", _cell(s["episodes_per_second"], 3), _cell(s["step_seconds"]), _cell(s["generation_seconds"]),
            _pair(s["trajectory_staleness_mean"], s["trajectory_staleness_max"]),
            _pair(s["decision_staleness_mean"], s["decision_staleness_max"]), spanning, f"{s['user_replies']:.0f}",
            _pair(s["delay_mean"], s["delay_max"]), f"{s['fallbacks']:.0f}", f"{s['startup_seconds']:.0f}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    ratio = ratios(summaries)
    if ratio:
        cells = ["async / sync", f"x{ratio['episodes_per_second']:.2f}", f"x{ratio['step_seconds']:.2f}"]
        lines.append("| " + " | ".join(cells + ["-"] * (len(HEADER) - len(cells))) + " |")
    return lines


def reading(summaries: dict[str, dict[str, float]], args) -> str:
    """A short paragraph read off the numbers."""
    if SYNC not in summaries or ASYNC not in summaries:
        return ""
    sync, fast, ratio = summaries[SYNC], summaries[ASYNC], ratios(summaries)
    waited = sync["generation_seconds"] / sync["step_seconds"]
    verdict = "raised" if ratio["episodes_per_second"] > 1 else "did not raise"
    text = (
        f"A synchronous step waits for its slowest episode: generation, the patient's waits included, took "
        f"{sync['generation_seconds']:.1f} of its {sync['step_seconds']:.1f} s ({waited:.0%}). colocate_async "
        f"({args.warmup_batches:g} warm-up batch{'es' if args.warmup_batches != 1 else ''}) {verdict} the throughput, "
        f"from {sync['episodes_per_second']:.3f} to {fast['episodes_per_second']:.3f} episodes per second "
        f"(x{ratio['episodes_per_second']:.2f}; steps of {fast['step_seconds']:.1f} s, generation "
        f"{fast['generation_seconds']:.1f} s of them; the rest of the step, log-probs, update and weight sync, took "
        f"{fast['step_seconds'] - fast['generation_seconds']:.1f} s against {sync['step_seconds'] - sync['generation_seconds']:.1f} s). "
        f"The cost is off-policy data: trajectories were "
        f"{fast['trajectory_staleness_mean']:.2f} weight versions old on average (at most "
        f"{fast['trajectory_staleness_max']:.0f})"
    )
    if fast["decision_staleness_mean"] == fast["decision_staleness_mean"]:
        text += (
            f", decisions {fast['decision_staleness_mean']:.2f} (at most {fast['decision_staleness_max']:.0f}), and "
            f"{_count(fast['spanning_decisions'])} of {fast['decisions']:.0f} decisions per step were written across a weight update"
        )
    text += (
        f". The server sent {fast['user_replies']:.0f} replies in the async run against {sync['user_replies']:.0f} "
        f"in the synchronous one (the warm-up batch and the episodes still in flight at the end)."
    )
    if any(s["fallbacks"] for s in summaries.values()):
        text += " Some replies fell back to the offline patient (the fallbacks column): those episodes did not wait for the server."
    return text


def command(args) -> list[str]:
    """The command line that reproduces the run (files by name only: no machine's paths on the page)."""
    words = ["python", "benchmarks/async_throughput.py", "--steps", str(args.steps), "--seed", str(args.seed),
             "--delay-mean", f"{args.delays.mean:g}", "--slow-share", f"{args.delays.slow_share:g}",
             "--slow-seconds", f"{args.delays.slow_seconds:g}", "--warmup-batches", f"{args.warmup_batches:g}"]  # fmt: skip
    if list(args.modes) != list(MODES):
        words += ["--modes", ",".join(args.modes)]
    if args.response_length != 2048:
        words += ["--response-length", str(args.response_length)]
    if args.mediq_source:
        words += ["--mediq-source", Path(args.mediq_source).name]
    return words + ["--publish"]


def machine() -> str:
    import torch

    return f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, torch {torch.__version__}"


def published(summaries: dict[str, dict[str, float]], args) -> str:
    cases = f"`{Path(args.mediq_source).name}`" if args.mediq_source else "the synthetic cases"
    head = (
        f"_{machine()}; MediQ on {cases}, {EPISODES_PER_STEP} episodes per step, {args.steps} steps per mode (the numbers: "
        f"steps 2-{args.steps}), the `hf` rollout; each patient reply after {args.delays.describe()}, seed {args.seed}; written by "
        f"`{shlex.join(command(args))}`_"
    )
    paragraph = reading(summaries, args)
    return "\n".join([head, "", *table(summaries), *(["", paragraph] if paragraph else [])]) + "\n"


def readme_block(summaries: dict[str, dict[str, float]], args) -> str:
    """Three rows for README.md: the gain (episodes per second, step time) and the cost (staleness)."""
    ratio = ratios(summaries)
    if ratio is None:
        return ""
    sync, fast = summaries[SYNC], summaries[ASYNC]
    lines = [
        f"- Synchronous against colocate_async training on the CPU, a simulated patient whose replies take "
        f"{args.delays.describe()}: `{shlex.join(command(args)[:2])}` "
        "([table](docs/reference/benchmarks.md#synchronous-against-colocate_async-training)).",
        "",
        "  | trainer mode | episodes / s | step (s) | trajectory staleness mean / max |",
        "  |---|---|---|---|",
        f"  | `{SYNC}` | {_cell(sync['episodes_per_second'], 3)} | {_cell(sync['step_seconds'])} | "
        f"{_pair(sync['trajectory_staleness_mean'], sync['trajectory_staleness_max'])} |",
        f"  | `{ASYNC}` | {_cell(fast['episodes_per_second'], 3)} | {_cell(fast['step_seconds'])} | "
        f"{_pair(fast['trajectory_staleness_mean'], fast['trajectory_staleness_max'])} |",
        f"  | async / sync | x{ratio['episodes_per_second']:.2f} | x{ratio['step_seconds']:.2f} | - |",
        "",
        f"  The gain: x{ratio['episodes_per_second']:.2f} episodes per second. The cost: the asynchronous run trained on "
        f"trajectories up to {fast['trajectory_staleness_max']:.0f} weight version(s) old (decisions up to "
        f"{fast['decision_staleness_max']:.0f}), which verl's rollout correction can reweight "
        "([Asynchronous training](docs/guides/async-training.md#rollout-correction-with-arew)).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="training steps per mode (the numbers are of steps 2 on)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated trainer modes, of {', '.join(MODES)}")
    parser.add_argument("--seed", type=int, default=0, help="the delays' and the data loader's seed, the same for every mode")
    parser.add_argument("--delay-mean", type=float, default=DelayModel.mean, help="mean of a reply's exponential delay, seconds")
    parser.add_argument("--slow-share", type=float, default=DelayModel.slow_share, help="share of replies that are slow")
    parser.add_argument("--slow-seconds", type=float, default=DelayModel.slow_seconds, help="seconds a slow reply adds")
    parser.add_argument("--warmup-batches", type=float, default=1.0, help="trainer.v1.colocate_async.num_warmup_batches (verl's default 1)")
    parser.add_argument("--response-length", type=int, default=2048, help="data.max_response_length (room for MediQ's 8 turns)")
    parser.add_argument("--mediq-source", help="a MediQ jsonl file (default: 40 cases from the synthetic ones of user_parse_rates.py)")
    parser.add_argument("--out", default="runs/bench-async")
    parser.add_argument("--publish", action="store_true", help="write the table into docs/reference/benchmarks.md and README.md")
    args = parser.parse_args()
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or not set(args.modes) <= set(MODES):
        parser.error(f"--modes: of {', '.join(MODES)}")
    if args.steps < 2:
        parser.error("--steps: at least 2 (the first step is not measured)")
    if args.delay_mean < 0 or args.slow_seconds < 0 or not 0 <= args.slow_share <= 1:
        parser.error("delays: --delay-mean and --slow-seconds >= 0, --slow-share in [0, 1]")
    args.delays = DelayModel(args.delay_mean, args.slow_share, args.slow_seconds)
    args.out = Path(args.out).resolve()
    args.out.mkdir(parents=True, exist_ok=True)

    source = mediq_source(args.out, args.mediq_source)
    model = scripted_agent(args.out, source)
    results = {}
    for mode in args.modes:
        begun = time.perf_counter()
        results[mode] = run_mode(mode, args, source, model)
        r = results[mode]
        print(f"{mode}: {len(r.steps)} steps in {time.perf_counter() - begun:.0f} s; {len(r.delays)} user replies"
              + (f", {r.unrecognised} not a patient's request" if r.unrecognised else "")
              + (f", {r.dropped} to a client that had gone" if r.dropped else ""))  # fmt: skip
    summaries = {mode: r.summary() for mode, r in results.items()}
    block = published(summaries, args)
    print("\n" + block)
    (args.out / "summary.json").write_text(json.dumps({"command": command(args), "summaries": summaries}, indent=1) + "\n")
    if args.publish:
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, block))
        print(f"wrote the table into {PAGE.relative_to(ROOT)}")
        short = readme_block(summaries, args)
        if short:
            README.write_text(replace_block(README.read_text(), README_MARKER, short))
            print(f"wrote the summary into {README.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
