"""benchmarks/async_throughput.py without a training run: its patient server answered through the project's LLM user
client (every reply parsed, none fallen back), its seeded delays, and the numbers and tables it reads off verl's
per-step metrics; no timings."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest

from arew.envs.users import FactRequest, LLMUser, LLMUserConfig
from arew_mediq.data import normalize_case

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """The benchmark module (its siblings import by name, as when it runs as a script)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("async_throughput")


def test_delays_are_seeded_and_mostly_fast(bench):
    model = bench.DelayModel(mean=0.2, slow_share=0.1, slow_seconds=5.0)
    delays = model.delays(seed=7, n=4000)
    assert delays == model.delays(seed=7, n=4000) != model.delays(seed=8, n=4000)
    slow = [d for d in delays if d >= 5.0]
    assert 0.08 < len(slow) / len(delays) < 0.12
    fast = [d for d in delays if d < 5.0]
    assert 0.18 < sum(fast) / len(fast) < 0.22 and min(delays) >= 0
    assert bench.DelayModel(mean=0.0, slow_share=0.0, slow_seconds=5.0).delays(0, 5) == [0.0] * 5


async def test_the_patient_server_answers_the_llm_user_with_parsed_replies_after_seeded_delays(bench):
    """The real LLM user's client and strict parser against the server: each reply names the fact that shares the
    question's terms, or none; nothing falls back, and the server waited the delays its seed draws, in order."""
    delays = bench.DelayModel(mean=0.002, slow_share=0.3, slow_seconds=0.01)
    cases = [normalize_case(record) for record in bench.synthetic_cases(4)]
    with bench.PatientServer(delays, seed=5) as server:
        user = LLMUser(LLMUserConfig(url=server.url, model="patient", timeout=10, max_retries=0))
        replies = {}
        for case in cases:
            open_ids = tuple(i for i in range(len(case["facts"])) if i not in case["known_fact_ids"])
            for question in ("Do you have a fever?", "Do you smoke?", "What is the capital of France?"):
                replies[case["case_id"], question] = await user.reply(FactRequest(question, case["facts"], open_ids, 2))
    assert user.stats.calls == user.stats.requests == len(replies) == 12
    assert user.stats.fallbacks == user.stats.parse_failures == 0 and server.unrecognised == 0
    assert all(reply.source == "llm" for reply in replies.values())
    facts = {case["case_id"]: case["facts"] for case in cases}
    named = {key: [facts[key[0]][i] for i in reply.ids] for key, reply in replies.items()}
    assert named["syn-1-00", "Do you have a fever?"] == ["His temperature is 39.1 C and his pulse is 104/min."]
    assert named["syn-1-00", "Do you smoke?"] == ["He smokes ten cigarettes a day."]
    assert named["syn-2-01", "Do you smoke?"] == ["She has never smoked."]
    assert all(named[case, "What is the capital of France?"] == [] for case in facts)  # FACTS: NONE, parsed
    assert server.served == delays.delays(seed=5, n=12)


def test_a_request_that_is_not_a_patients_is_answered_none(bench):
    assert bench.patient_reply([{"role": "user", "content": "hello"}]) is None
    assert bench.patient_reply([]) is None


def _steps(step_seconds, gen_seconds, staleness=None, spanning=None, fallbacks=0.0):
    steps = []
    for i, (step, gen) in enumerate(zip(step_seconds, gen_seconds)):
        data = {"step": i + 1, "timing_s/step": step, "timing_s/gen": gen, "arew/decisions": 100.0,
                "training/off_policy/trajectory_staleness/mean": 0.0 if staleness is None else staleness[i][0],
                "training/off_policy/trajectory_staleness/max": 0.0 if staleness is None else staleness[i][1],
                "episode/proxy_user_fallbacks/mean": fallbacks}  # fmt: skip
        if spanning is not None:
            data |= {"arew/off_policy/decision_staleness/mean": 0.5, "arew/off_policy/decision_staleness/max": 1.0,
                     "arew/off_policy/spanning_decisions": spanning[i]}  # fmt: skip
        steps.append(data)
    return steps


def test_the_numbers_ratios_and_tables_come_from_the_steps_after_the_first(bench):
    sync = bench.summarize(_steps([30, 10, 14], [25, 8, 12]), wall_seconds=100, delays=[0.1, 5.3, 0.2], episodes_per_step=8)
    fast = bench.summarize(
        _steps([20, 4, 8], [15, 2, 5], staleness=[(0, 0), (0.5, 1), (1.0, 2)], spanning=[0, 10, 30]),
        wall_seconds=90, delays=[0.1] * 5, episodes_per_step=8,
    )
    assert sync["episodes_per_second"] == pytest.approx(16 / 24) and fast["episodes_per_second"] == pytest.approx(16 / 12)
    assert sync["step_seconds"] == 12 and sync["generation_seconds"] == 10 and sync["startup_seconds"] == 46
    assert sync["decision_staleness_mean"] != sync["decision_staleness_mean"]  # not logged: NaN, shown as "-"
    assert fast["trajectory_staleness_mean"] == 0.75 and fast["trajectory_staleness_max"] == 2
    assert fast["spanning_decisions"] == 20 and fast["decision_staleness_max"] == 1.0
    assert sync["user_replies"] == 3 and sync["delay_max"] == 5.3 and sync["delay_mean"] == pytest.approx(5.6 / 3)
    summaries = {bench.SYNC: sync, bench.ASYNC: fast}
    assert bench.ratios(summaries) == pytest.approx({"episodes_per_second": 2.0, "step_seconds": 0.5})
    assert bench.ratios({bench.SYNC: sync}) is None
    assert bench.trained_episodes({"arew/decisions": 102.0, "episode/decisions/mean": 17.0}) == 6
    assert bench.trained_episodes({"arew/decisions": 102.0}) == bench.EPISODES_PER_STEP == 8  # smoke's 4 prompts x 2

    lines = bench.table(summaries)
    assert len(lines) == 5 and lines[-1].startswith("| async / sync | x2.00 | x0.50 |")
    assert "| `arew` | 0.667 | 12.00 | 10.00 | 0.00 / 0.00 | - | - | 3 |" in lines[2]
    assert "| 0.75 / 2.00 | 0.50 / 1.00 | 20 (100) |" in lines[3]
    args = argparse.Namespace(steps=3, seed=0, delays=bench.DelayModel(), warmup_batches=1.0, modes=list(bench.MODES),
                              response_length=2048, mediq_source=None)  # fmt: skip
    text = bench.reading(summaries, args)
    assert "from 0.667 to 1.333 episodes per second (x2.00" in text and "20 of 100 decisions" in text
    readme = bench.readme_block(summaries, args)
    assert readme.count("\n  | `arew") == 2 and "| async / sync | x2.00 | x0.50 | - |" in readme
    assert "python benchmarks/async_throughput.py" in readme and str(bench.ROOT) not in readme
    assert bench.published(summaries, args).count("\n|") == 5


def test_each_mode_gets_its_trainer_and_the_user_server(bench):
    args = argparse.Namespace(delays=bench.DelayModel(slow_seconds=5), response_length=2048, seed=3, warmup_batches=2.0)
    sync, fast = (bench.overrides(mode, "http://127.0.0.1:9/v1", args) for mode in bench.MODES)
    assert "trainer.v1.trainer_mode=arew" in sync and "trainer.v1.trainer_mode=arew_colocate_async" in fast
    assert "trainer.v1.colocate_async.num_warmup_batches=2" in fast and not any("warmup" in o for o in sync)
    assert "arew_agent.env_options.user_url=http://127.0.0.1:9/v1" in sync and "data.seed=3" in sync
    timeout = next(o for o in sync if "user_timeout" in o)
    assert float(timeout.split("=")[1]) > 5 + 1  # longer than any slow reply


def test_the_synthetic_cases_fill_smokes_splits(bench):
    cases = bench.synthetic_cases()
    assert len({case["id"] for case in cases}) == len(cases) == bench.N_CASES
    assert all(normalize_case(case) is not None for case in cases)
