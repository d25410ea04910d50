"""No agent text, however malformed, may raise out of a MediQ or FloDial round."""

import asyncio
import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.envs.base import StepResult
from arew.envs.parsing import MAX_TEXT_CHARS, payload_kind
from arew.envs.registry import make_env

MEDIQ = {
    "task": "mediq",
    "initial_info": "A 30-year-old woman comes to the clinic with burning on urination.",
    "question": "Which of the following is the most likely diagnosis?",
    "options": ["Pyelonephritis", "Influenza", "Cystitis", "Appendicitis"],
    "answer_idx": 2,
    "facts": [
        "Patient is a 30-year-old woman.",
        "She has had a fever for three days.",
        "She takes oral contraceptives.",
        "Her temperature is 39.2 C.",
        "She smokes one pack of cigarettes per day.",
    ],
    "known_fact_ids": [0],
    "max_turns": 8,
}
FLODIAL = {
    "problem": "Your laptop is overheating.",
    "candidates": ["Fan broken.", "Thermal paste dried.", "Dust in vents.", "Busy processor.", "Bad battery."],
    "gold_idx": 1,
    "table_questions": ["Is the fan spinning?", "Is the air vent blocked by dust?", "Does it shut down when hot?"],
    "table_answers": ["Yes", "No", "Yes"],
    "max_turns": 10,
}
ROWS = {
    "mediq": MEDIQ,
    "flodial-easy": {**FLODIAL, "task": "flodial-easy"},
    "flodial-hard": {**FLODIAL, "task": "flodial-hard"},
}
SIZES = {"mediq": 4, "flodial-easy": 5, "flodial-hard": 5}

FRAGMENTS = [
    "<interact>", "</interact>", "<answer>", "</answer>", "<scratch>", "</scratch>", ",", " ", "\n", "0", "1", "0.5",
    ".5", "1e999", "-1", "nan", "inf", "٣", "，", "[", "]", "\x00", "é", "😀", "\u202e", "\ud800", "?", "fever", "fan",
    "Do you smoke?", "Is the fan spinning?", "0" * 40,
]  # fmt: skip
FUZZ_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=40).map("".join),
)
QUESTIONS = st.sampled_from(
    [
        "Do you have a fever?",
        "Do you smoke?",
        "Any medications?",
        "Is the fan spinning?",
        "Is the vent dusty?",
        "Why?",
        "12",
    ]
)
ADVERSARIAL = [
    "", "<interact>", "</interact><interact>", "<interact></interact>", "<interact>?</interact>",
    "<interact>" + "a" * 10_000 + "</interact>", "<interact>\ud800?</interact>", "<interact>\x00fever</interact>",
    "<answer><interact>fever?</interact></answer>", "<interact>nan, nan, nan, nan, nan</interact>",
    "<answer>0.5, 0.5, 0.5, 0.5, 0.5</answer>", "<answer>1e309, 0, 0, 0</answer>", "<answer>0.5</answer>" * 2,
    "x" * (MAX_TEXT_CHARS + 1), "<scratch>" * 1000 + "<interact>fever?</interact>", "<interact>((((</interact>",
]  # fmt: skip


def turn_pairs(task):
    n = SIZES[task]
    weight = st.sampled_from(range(11)).map(lambda k: f"{k / 10:g}")
    vector = st.lists(weight, min_size=n, max_size=n).map(", ".join)
    good_q = QUESTIONS.map("<scratch>x</scratch><interact>{}</interact>".format)
    good_v = vector.map("<interact>{}</interact>".format)
    final = st.one_of(vector, FUZZ_TEXT).map("<answer>{}</answer>".format)
    junk = st.one_of(FUZZ_TEXT, FUZZ_TEXT.map("<interact>{}</interact>".format), final)
    mostly = lambda good: st.sampled_from(range(5)).flatmap(lambda k: good if k else junk)  # noqa: E731
    return st.tuples(mostly(good_q), mostly(good_v), st.one_of(st.none(), good_v, FUZZ_TEXT))


def check_step(step, channel):
    assert isinstance(step, StepResult) and isinstance(step.feedback, str) and step.feedback
    assert step.critique in (-1, 0, 1) and step.channel == channel and isinstance(step.info, dict)
    if not step.valid:
        assert step.critique == -1 and "invalid because" in step.feedback


async def drive(env, triples):
    script = itertools.cycle(triples or [("", "", None)])
    for _ in range(env.max_turns):
        question, scores, cf = next(script)
        for phase, text in (("act", question), ("update", scores)):
            if payload_kind(text) == "answer":
                check_step(env.answer(text), "bt")
                return
            if phase == "act":
                check_step(await env.act(text), "as")
                feedback = env.counterfactual_feedback()
                assert feedback is None or isinstance(feedback, str)
            else:
                check_step(env.update(text, counterfactual=cf if feedback is not None else None), "bt")
    step = env.answer(next(script)[1])
    check_step(step, "bt")
    assert step.done


def check_episode(env):
    assert env.phase == "done" and env.reward() in (0.0, 1.0)
    p = env.proxies()
    assert len(p["as"]) == len(p["bt"]) <= env.max_turns
    assert all(a in (0, 1, 2) for a in p["as"]) and all(math.isfinite(b) and abs(b) <= 2 for b in p["bt"])
    assert all(isinstance(v, float) and math.isfinite(v) for k, v in p.items() if k not in ("as", "bt"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_episodes_never_raise_on_fuzzed_turns(data):
    task = data.draw(st.sampled_from(sorted(ROWS)))
    triples = data.draw(st.lists(turn_pairs(task), min_size=1, max_size=10))
    env = make_env(task, ROWS[task], seed=0)
    asyncio.run(drive(env, triples))
    check_episode(env)


@pytest.mark.parametrize("task", sorted(ROWS))
def test_every_round_survives_adversarial_inputs(task):
    n = SIZES[task]
    uniform = "<interact>" + ", ".join(["0.25"] * n) + "</interact>"
    for text in ADVERSARIAL:
        env = make_env(task, ROWS[task], seed=0)
        asyncio.run(drive(env, [(text, text, text)]))
        check_episode(env)
        env = make_env(task, ROWS[task], seed=0)
        asyncio.run(drive(env, [("<interact>Do you have a fever?</interact>", uniform, text)]))
        check_episode(env)
        env = make_env(task, ROWS[task], seed=0)
        asyncio.run(env.act("<interact>Is the fan spinning, any fever?</interact>"))
        check_step(env.answer(text), "bt")
        check_episode(env)
