"""tau2 telecom environment speed: episode start and step times, solo and dual control.

    python benchmarks/tau2_env_speed.py [--repeats 3]

Every base task (tau2's train 74 + test 40) is played from its parquet row the way the agent
loop plays it (``make_env`` from ``extra_info``, then one ``act`` per turn):

- solo: the task's expected actions as the agent's tool calls, in order, then ``<answer>``;
- dual control with the offline customer: the agent's expected actions as its tool calls, each
  expected phone action asked for in a plain request built from the tool's description (never
  its name), then a check request; the customer runs the phone tools.

Reported: the median episode start (``make_env``, which parses the task and builds its
databases), the median and 90th-percentile time of one step (tool call; customer message),
steps per second over whole episodes, and the mean official reward as a check that the replay
did what it should (1.0 solo). Times are wall clock on this machine, best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from arew.envs.registry import make_env
from arew_tau2.runtime import runtime
from arew_tau2.tasks import build_splits


def request_for(name: str, arguments: dict) -> str:
    """A plain request for a phone action, from its description (the offline customer matches meaning, not names)."""
    verb, _, rest = runtime().user_tools[name].summary.partition(" ")
    verb = verb.lower()[:-1] if verb.endswith("s") else verb.lower()
    text = f"Could you please {verb} {rest.rstrip('.')}?"
    return text + "".join(f" Use {str(v).replace('_', ' ')} for the {k.replace('_', ' ')}." for k, v in arguments.items())


def agent_turns(task, solo: bool) -> list[tuple[str, str]]:
    """(kind, text) of the replayed agent turns: "tool" calls and (dual control) "message"s."""
    turns = [] if solo else [("message", "Hello, thank you for calling. How can I help you today?")]
    for action in task.evaluation_criteria.actions:
        call = json.dumps({"name": action.name, "arguments": action.arguments})
        if solo or action.requestor == "assistant":
            turns.append(("tool", f"<interact>{call}</interact>"))
        else:
            turns.append(("message", f"<interact>{request_for(action.name, dict(action.arguments))}</interact>"))
    if not solo:
        turns.append(("message", "<interact>Thanks. Could you check whether it works now?</interact>"))
    return turns


async def play(info: dict, solo: bool, times: dict[str, list[float]]) -> tuple[float, int]:
    """One episode; returns (official reward, steps played)."""
    started = time.perf_counter()
    env = make_env(info["task"], info, info["seed"], max_turns=60, reward="official")  # the offline customer by default
    times["start"].append(time.perf_counter() - started)
    steps = 0
    for kind, text in agent_turns(env.task, solo):
        started = time.perf_counter()
        step = await env.act(text)
        times[kind].append(time.perf_counter() - started)
        steps += 1
        if step.done:
            break
    else:
        env.answer("<answer>Your line should work now. Goodbye.</answer>")
    return env.reward(), steps


async def measure(task_name: str) -> dict[str, float]:
    rows = [info for split in ("train", "test") for info in build_splits(task_name)[split]]
    times: dict[str, list[float]] = {"start": [], "tool": [], "message": []}
    rewards, steps = [], 0
    started = time.perf_counter()
    for info in rows:
        reward, played = await play(info, task_name == "tau2-solo", times)
        rewards.append(reward)
        steps += played
    wall = time.perf_counter() - started
    figures = {"episodes": len(rows), "start_ms": 1e3 * statistics.median(times["start"]), "steps_per_s": steps / wall}
    for kind in ("tool", "message"):
        if times[kind]:
            ordered = sorted(times[kind])
            figures[f"{kind}_ms"] = 1e3 * statistics.median(ordered)
            figures[f"{kind}_p90_ms"] = 1e3 * ordered[int(0.9 * (len(ordered) - 1))]
    figures["official_reward"] = sum(rewards) / len(rewards)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runtime()  # the per-process setup (tau2's import, pristine databases, policies) is not an episode's cost
    for task_name in ("tau2-solo", "tau2-dual"):
        runs = [asyncio.run(measure(task_name)) for _ in range(args.repeats)]
        best = max(runs, key=lambda figures: figures["steps_per_s"])
        line = ", ".join(f"{key} {value:.0f}" if key in ("episodes", "steps_per_s") else f"{key} {value:.2f}" for key, value in best.items())
        print(f"{task_name}: {line}")


if __name__ == "__main__":
    main()
