import time

import pytest

from envs.parsing import (
    MAX_TEXT_CHARS,
    PairQuery,
    extract_payload,
    extract_tag,
    parse_numbers,
    parse_pair_query,
    parse_vector,
    payload_kind,
)


def test_extract_tag_returns_stripped_payload_around_scratch():
    res = extract_tag("<scratch>think <b>x</b></scratch>\n<interact> 3, 7 | 1, 4 </interact>\n", "interact")
    assert res.ok and res.value == "3, 7 | 1, 4"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("no tags", "no <interact>"),
        ("<interact>1, 2", "exactly one"),
        ("1, 2</interact>", "exactly one"),
        ("</interact>1, 2<interact>", "comes before"),
        ("<interact>1</interact><interact>2</interact>", "found 2 and 2"),
        ("<interact><interact>1</interact></interact>", "found 2 and 2"),
        ("<Interact>1</Interact>", "no <interact>"),
    ],
)
def test_extract_tag_rejects_malformed_blocks(text, fragment):
    res = extract_tag(text, "interact")
    assert not res.ok and res.value is None and fragment in res.error


def test_extract_tag_rejects_non_text_and_oversized_input_quickly():
    assert not extract_tag(None, "answer").ok
    assert not extract_tag(b"<answer>1</answer>", "answer").ok
    huge = "<answer>" + "1," * 5_000_000 + "</answer>"
    start = time.perf_counter()
    res = extract_tag(huge, "answer")
    assert time.perf_counter() - start < 0.05
    assert not res.ok and str(MAX_TEXT_CHARS) in res.error


def test_payload_kind_routes_only_unambiguous_turns():
    assert payload_kind("<scratch>s</scratch><answer>0.1, 0.2</answer>") == "answer"
    assert payload_kind("<interact>1, 2</interact>") == "interact"
    assert payload_kind("<interact>1, 2</interact><answer>0.1</answer>") is None
    assert payload_kind("<answer>0.1") is None
    assert payload_kind("plain text") is None
    assert payload_kind(42) is None


def test_extract_payload_rejects_mixed_payload_kinds():
    res = extract_payload("<interact>1, 2</interact> and </answer>", "interact")
    assert not res.ok and "<answer>" in res.error
    assert extract_payload("<interact>1, 2</interact>", "interact").value == "1, 2"


def test_parse_vector_accepts_plain_and_bracketed_lists():
    assert parse_vector("0.1, .5 1 ,1e-1", 4).value == (0.1, 0.5, 1.0, 0.1)
    assert parse_vector("[0, 1, 0.25]", 3).value == (0.0, 1.0, 0.25)
    assert parse_vector("(0.3,\n0.7)", 2).value == (0.3, 0.7)
    assert parse_vector("+0.5, -0.0", 2).value == (0.5, -0.0)


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ("", "no numbers"),
        ("0.1, 0.2", "expected 3 numbers, got 2"),
        ("0.1, 0.2, 0.3, 0.4", "expected 3 numbers, got 4"),
        ("0.1, nan, 0.3", "not a plain decimal"),
        ("0.1, inf, 0.3", "not a plain decimal"),
        ("0.1, 1e999, 0.3", "not a finite"),
        ("0.1, 1.5, -0.2", "entries [2, 3]"),
        ("0.1; 0.2; 0.3", "not a plain decimal"),
        ("٠.١, 0.2, 0.3", "not a plain decimal"),
        ("0x1, 0.2, 0.3", "not a plain decimal"),
        ("1_0, 0.2, 0.3", "not a plain decimal"),
        ("0.1，0.2，0.3", "not a plain decimal"),
        ("w1, w2, w3", "not a plain decimal"),
    ],
)
def test_parse_vector_rejects_bad_numbers_with_reason(payload, fragment):
    res = parse_vector(payload, 3)
    assert not res.ok and fragment in res.error


def test_parse_numbers_caps_the_count():
    assert "too many" in parse_numbers("1 " * 65).error
    assert len(parse_numbers("1 " * 64).value) == 64


def test_parse_pair_query_gated_is_zero_based_with_sorted_attrs():
    res = parse_pair_query("3, 7 | 4, 1", n_items=10, n_attrs=6, subset_size=2)
    assert res.value == PairQuery(2, 6, (0, 3))
    assert parse_pair_query("[3 7] | (1 4 6)", 10, 6, 3).value == PairQuery(2, 6, (0, 3, 5))


def test_parse_pair_query_full_uses_all_attributes():
    assert parse_pair_query(" 10, 1 ", 10, 8, 8).value == PairQuery(9, 0, tuple(range(8)))
    assert "no '|'" in parse_pair_query("1, 2 | 1, 2", 10, 8, 8).error


def test_pair_key_ignores_item_order_but_not_attributes():
    a = parse_pair_query("3, 7 | 1, 4", 10, 6, 2).value
    b = parse_pair_query("7, 3 | 4, 1", 10, 6, 2).value
    c = parse_pair_query("3, 7 | 1, 5", 10, 6, 2).value
    assert a.key == b.key and a.key != c.key


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ("3, 7", "exactly one '|'"),
        ("3, 7 | 1, 4 | 2", "exactly one '|'"),
        ("3, 3 | 1, 4", "distinct"),
        ("0, 7 | 1, 4", "between 1 and 10"),
        ("3, 11 | 1, 4", "between 1 and 10"),
        ("3, 7, 8 | 1, 4", "exactly two"),
        ("3 | 1, 4", "exactly two"),
        ("3, 7 | 1, 1", "distinct"),
        ("3, 7 | 1, 7", "between 1 and 6"),
        ("3, 7 | 1, 4, 5", "exactly 2 attributes"),
        ("3, 7 | ", "exactly 2 attributes"),
        ("3.0, 7 | 1, 4", "whole numbers"),
        ("-3, 7 | 1, 4", "whole numbers"),
        ("movie 3, 7 | 1, 4", "whole numbers"),
        ("3, 99999999 | 1, 4", "whole numbers"),
        ("٣, 7 | 1, 4", "whole numbers"),
    ],
)
def test_parse_pair_query_rejects_with_reason(payload, fragment):
    res = parse_pair_query(payload, n_items=10, n_attrs=6, subset_size=2)
    assert not res.ok and fragment in res.error
