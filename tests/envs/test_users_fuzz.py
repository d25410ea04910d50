"""No text, however malformed, may raise out of the new parsers, the lexical matcher or the offline user."""

import asyncio
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arew.envs.lexical import coverage_scores, question_key, similarity_scores, terms
from arew.envs.parsing import MAX_TEXT_CHARS, parse_question, parse_selection
from arew.envs.users import FactRequest, OfflineUser, RowRequest
from parse_checks import check

FRAGMENTS = [
    "FACTS", "facts", "ROW", "row", ":", "::", "NONE", "none", "Unknown", ",", " ", "\n", "\r", "\t", ".", "..",
    "0", "1", "2", "3", "10", "-1", "1.5", "1e3", "٣", "，", "\x00", "é", "😀", "\u202e", "\ud800", "?", "<interact>",
    "</interact>", "fever", "fan", "is", "the", "99999999999", "0" * 40, "Yes", "no", "because", "or", "and", "**", "`",
    "-", "(", ")", "1.", "2)", "She has a fever.", "Is the fan on?", "FACTS:\n", "ROW: 1\n", "\u2028",
]  # fmt: skip
OPTIONS = {1: "She has a fever.", 2: "Is the fan on?", 3: "fan"}
FUZZ_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=40).map("".join),
)
ALLOWED = st.lists(st.integers(-2, 12), max_size=8)
ADVERSARIAL = [
    None, 12, b"FACTS: 1", ["FACTS: 1"], "", " ", "FACTS", "FACTS:", "FACTS: ,", "FACTS: 1,,2", "FACTS: NONE, 1",
    "FACTS: 1 2", "FACTS 1", ": 1", "FACTS: +1", "FACTS: 1.0", "FACTS: ١", "FACTS: 1\n", "FACTS: 1\nFACTS: 2",
    "x" * (MAX_TEXT_CHARS + 1), "FACTS: " + "1, " * 5000, "\ud800", "ROW: 1\r", "FACTS:\u00a01",
    "FACTS:\n1. She has a fever.", "1. She has a fever.\n" * 3, "Yes, FACTS: 1 or 2", "FACTS: 1 (2)", "ROW: 1\nROW:",
    "**FACTS:** **", "No\n\nROW: 2 - Is the fan on?", "FACTS: 1." + " x" * 900, "FACTS: 1\n" + "FACTS: 1\n" * 400,
]  # fmt: skip


def check_question(value):
    assert isinstance(value, str) and 0 < len(value) <= 300 and value == value.strip()
    assert any(ch.isalpha() for ch in value) and all(ch.isprintable() for ch in value)
    value.encode("utf-8")


def check_selection(allowed, max_count):
    def inner(value):
        assert isinstance(value, tuple) and len(value) <= max_count and len(set(value)) == len(value)
        assert all(isinstance(n, int) and n in allowed for n in value)

    return inner


def run_all(text, allowed=(1, 2, 3), max_count=2):
    check(parse_question(text), check_question)
    for label in ("FACTS", "ROW"):
        check(parse_selection(text, label, allowed, max_count), check_selection(set(allowed), max_count))
        for truncated in (False, True):  # with the texts offered: the list form is read too
            result = parse_selection(text, label, allowed, max_count, OPTIONS, truncated)
            check(result, check_selection(set(allowed), max_count))
    for scores in (
        coverage_scores(text, ["a fever", "b", text if isinstance(text, str) else ""]),
        similarity_scores(text, ["x y", "fan?"]),
    ):
        assert all(isinstance(s, float) and math.isfinite(s) and 0.0 <= s <= 1.0 + 1e-9 for s in scores)
    terms(text)
    question_key(text)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FUZZ_TEXT, ALLOWED, st.integers(0, 3))
def test_parsers_and_matchers_never_raise(text, allowed, max_count):
    run_all(text, tuple(allowed), max_count)


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_adversarial_inputs(text):
    run_all(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FUZZ_TEXT, st.lists(st.text(max_size=60), max_size=6), st.integers(0, 3))
def test_offline_user_never_raises_and_stays_in_range(question, passages, max_facts):
    user = OfflineUser()
    facts = tuple(passages)
    candidates = tuple(range(0, len(facts), 2)) + (len(facts) + 3, -1)
    reply = asyncio.run(user.reply(FactRequest(question, facts, candidates, max_facts)))
    assert set(reply.ids) <= set(range(0, len(facts), 2)) and len(reply.ids) <= max_facts
    reply = asyncio.run(user.reply(RowRequest(question, facts)))
    assert len(reply.ids) <= 1 and all(0 <= i < len(facts) for i in reply.ids)


def test_selection_examples():
    assert parse_selection(" facts :  3 , 1 .", "FACTS", (1, 3), 2).value == (3, 1)
    assert parse_selection("ROW: Unknown", "ROW", (1,), 1).value == ()
    assert not parse_selection("ROW: 1, 2", "ROW", (1, 2), 1).ok
    assert not parse_selection("FACTS: 4", "FACTS", (1, 3), 2).ok
    assert parse_question("  Do you\nsmoke?  ").value == "Do you smoke?"


@pytest.mark.parametrize("separator", ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_every_unicode_line_boundary_makes_a_second_line(separator):
    from arew.envs.parsing import parse_selection

    assert parse_selection("FACTS: 2", "FACTS", [1, 2, 3], 2).ok
    result = parse_selection(f"FACTS: 2{separator}FACTS: 3", "FACTS", [1, 2, 3], 2)
    assert not result.ok and "single line" in result.error
