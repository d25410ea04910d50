"""No text, however malformed, may raise out of a parser or an environment round."""

import asyncio
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.envs.base import StepResult
from arew.envs.parsing import (
    MAX_TEXT_CHARS,
    PairQuery,
    ParseResult,
    extract_payload,
    extract_tag,
    parse_numbers,
    parse_pair_query,
    parse_vector,
    payload_kind,
)
from arew.envs.registry import make_env
from arew_preference.generator import VARIANTS, generate_instance

FRAGMENTS = [
    "<interact>",
    "</interact>",
    "<answer>",
    "</answer>",
    "<scratch>",
    "</scratch>",
    "<interact",
    "answer>",
    "|",
    ",",
    " ",
    "\n",
    "\t",
    "0",
    "1",
    "2",
    "3",
    "7",
    "10",
    "0.5",
    ".5",
    "1.",
    "5e-1",
    "1e999",
    "-1",
    "-0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "٣",
    "，",
    "[",
    "]",
    "(",
    ")",
    "\x00",
    "é",
    "😀",
    "\u202e",
    "\ud800",
    "e",
    "+",
    ".",
    "99999999999",
    "0" * 40,
]
FUZZ_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=40).map("".join),
)
NUMBER_LIST = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-2, 12).map(str)),
    max_size=10,
).map(", ".join)
SMALL_INTS = st.lists(st.integers(0, 11).map(str), min_size=1, max_size=4).map(", ".join)
JUNK_PAYLOAD = st.one_of(NUMBER_LIST, SMALL_INTS, st.builds("{} | {}".format, SMALL_INTS, NUMBER_LIST))


def interact(payload):
    return st.builds("<scratch>x</scratch><interact>{}</interact>".format, payload)


def mostly(good, junk):
    """``good`` four times in five; a flat ``one_of`` would give each junk branch equal say."""
    return st.sampled_from(range(5)).flatmap(lambda k: good if k else junk)


def turn_pairs(task):
    """(action text, update text) pairs for ``task``: mostly well formed, with junk mixed in."""
    v = VARIANTS[task]
    items = st.sampled_from(range(12))
    attrs = st.one_of(
        st.permutations(range(1, v.n_attrs + 1)).map(lambda p: p[: v.subset_size]),
        st.lists(st.sampled_from(range(9)), min_size=v.subset_size, max_size=v.subset_size),
    )
    if v.subset_size < v.n_attrs:
        query = st.builds(lambda i, j, ks: f"{i}, {j} | " + ", ".join(map(str, ks)), items, items, attrs)
    else:
        query = st.builds("{}, {}".format, items, items)
    weight = st.sampled_from(range(101)).map(lambda k: f"{k / 100:g}")
    vector = st.lists(weight, min_size=v.n_attrs, max_size=v.n_attrs).map(", ".join)
    final = st.builds("<answer>{}</answer>".format, st.one_of(vector, JUNK_PAYLOAD))
    junk = st.one_of(interact(JUNK_PAYLOAD), FUZZ_TEXT, final)
    return st.tuples(mostly(interact(query), junk), mostly(interact(vector), junk))


ADVERSARIAL = [
    "",
    " ",
    "\x00" * 10,
    "<interact>",
    "</interact>",
    "</interact><interact>",
    "<interact></interact>",
    "<interact><interact>1, 2 | 1, 2</interact>",
    "<interact>1, 2 | 1, 2</interact></interact>",
    "<answer><interact>1, 2</interact></answer>",
    "<interact>nan, nan, nan, nan, nan, nan</interact>",
    "<interact>1e309, 0, 0, 0, 0, 0</interact>",
    "<interact>1e-400, 1, 1, 1, 1, 1</interact>",
    "<interact>" + "1," * 100_000 + "</interact>",
    "<interact>" + "9" * 10_000 + ", 2 | 1, 2</interact>",
    "<interact>٣, ٧ | ١, ٤</interact>",
    "<interact>3，7 | 1，4</interact>",
    "<INTERACT>3, 7 | 1, 4</INTERACT>",
    "<interact>3, 3 | 1, 2</interact>",
    "<interact>0, 11 | 1, 2</interact>",
    "<interact>3, 7 | 1, 1</interact>",
    "<interact>3, 7 | 1, 2, 3, 4, 5, 6, 7, 8, 9</interact>",
    "<interact>3, 7 | </interact>",
    "<interact>|||</interact>",
    "<interact>-1, 2 | 1, 2</interact>",
    "<interact>1.0, 2 | 1, 2</interact>",
    "<interact>0x1p-2, 1, 1, 1, 1, 1</interact>",
    "<interact>[[0.1, 0.2]]</interact>",
    "<interact>((0.5))</interact>",
    "<interact>\ud800</interact>",
    "<interact>😀, 0.5, 0.5</interact>",
    "<answer>" + "0.5, " * 7 + "</answer>",
    "<answer>0.5</answer>" * 2,
    "</answer>",
    "<answer>",
    "<answer> , , , </answer>",
    "<answer>1_0, 1, 1, 1, 1, 1</answer>",
    "<interact>3, 7 | 1, 4</interact><answer>0.5</answer>",
    "x" * (MAX_TEXT_CHARS + 1),
    "<scratch>" * 1000 + "<interact>1, 2</interact>",
    "<interact>" + "(" * 5000 + "</interact>",
]
ROWS = {name: generate_instance(v, np.random.default_rng(0)) for name, v in VARIANTS.items()}


def check_result(res, shape_check=None):
    assert isinstance(res, ParseResult)
    assert res.ok == (res.error is None)
    if res.ok:
        if shape_check:
            shape_check(res.value)
    else:
        assert isinstance(res.error, str) and res.error and res.value is None


def check_vector(length):
    def check(value):
        assert isinstance(value, tuple) and len(value) == length
        assert all(isinstance(x, float) and math.isfinite(x) and 0.0 <= x <= 1.0 for x in value)

    return check


def check_pair(value):
    assert isinstance(value, PairQuery)
    assert 0 <= value.first < 10 and 0 <= value.second < 10 and value.first != value.second
    assert len(value.attrs) == 2 and all(0 <= k < 6 for k in value.attrs)


def run_parsers(text):
    for tag in ("interact", "answer"):
        check_result(extract_tag(text, tag), lambda v: isinstance(v, str))
        check_result(extract_payload(text, tag), lambda v: isinstance(v, str))
    assert payload_kind(text) in (None, "interact", "answer")
    check_result(parse_numbers(text), lambda v: all(math.isfinite(x) for x in v))
    check_result(parse_vector(text, 6), check_vector(6))
    check_result(parse_pair_query(text, 10, 6, 2), check_pair)


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FUZZ_TEXT)
def test_parsers_never_raise_and_are_well_typed(text):
    run_parsers(text)
    payload = extract_tag(text, "interact")
    if payload.ok:
        run_parsers(payload.value)


@pytest.mark.parametrize("text", ADVERSARIAL + [None, b"<answer>1</answer>", 12345, ["<answer>"]])
def test_parsers_survive_adversarial_inputs(text):
    run_parsers(text)


def check_step(step, channel):
    assert isinstance(step, StepResult) and isinstance(step.feedback, str) and step.feedback
    assert step.critique in (-1, 0, 1) and step.channel == channel
    assert isinstance(step.valid, bool) and isinstance(step.done, bool) and isinstance(step.info, dict)
    if not step.valid:
        assert step.critique == -1 and "invalid because" in step.feedback


async def drive(env, texts):
    """The agent loop of arew.envs.base, fed ``texts`` cyclically until the episode ends."""
    script = itertools.cycle(texts or [""])
    for _ in range(env.max_turns):
        for phase in ("act", "update"):
            text = next(script)
            if payload_kind(text) == "answer":
                check_step(env.answer(text), "bt")
                return
            if phase == "act":
                check_step(await env.act(text), "as")
            else:
                check_step(env.update(text), "bt")
    step = env.answer(next(script))
    check_step(step, "bt")
    assert step.done


def check_episode(env):
    assert env.phase == "done"
    assert 0.0 <= env.reward() <= 1.0
    p = env.proxies()
    assert len(p["as"]) == len(p["bt"]) <= env.max_turns
    assert all(a in (0, 1) for a in p["as"]) and all(math.isfinite(b) and abs(b) <= 2 for b in p["bt"])
    assert all(isinstance(v, float) and math.isfinite(v) for k, v in p.items() if k not in ("as", "bt"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_episodes_never_raise_on_fuzzed_turns(data):
    task = data.draw(st.sampled_from(sorted(ROWS)))
    pairs = data.draw(st.lists(turn_pairs(task), min_size=1, max_size=13))
    texts = [text for pair in pairs for text in pair]
    env = make_env(task, ROWS[task], seed=0, replay_samples=20)
    asyncio.run(drive(env, texts))
    check_episode(env)


@pytest.mark.parametrize("task", sorted(ROWS))
def test_every_round_survives_adversarial_inputs(task):
    for text in ADVERSARIAL:
        env = make_env(task, ROWS[task], seed=0, replay_samples=20)
        asyncio.run(drive(env, [text]))
        check_episode(env)
        for phase_texts in ([text], ["<interact>1, 2 | 1, 2</interact>", text]):
            env = make_env(task, ROWS[task], seed=0, replay_samples=20)
            for t in phase_texts[:-1]:
                asyncio.run(env.act(t))
            step = env.answer(phase_texts[-1])
            check_step(step, "bt")
            check_episode(env)
