import time

import pytest

from arew.envs.parsing import (
    MAX_TEXT_CHARS,
    PairQuery,
    extract_payload,
    extract_tag,
    parse_numbers,
    parse_pair_query,
    parse_selection,
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


# ---- parse_selection: the LLM user's reply (arew.envs.users.llm) ---------------------------------------
FACTS = {
    2: "She needs to urinate much more often than usual.",
    3: "She has mild tenderness above the pubic bone.",
    4: "She has no fever.",
    6: "She is sexually active with one partner and uses condoms.",
}
ROWS = {1: "Does the fan make any noise when the laptop is hot?", 2: "Are the air vents free of dust?", 3: "Does the laptop stay hot when it is idle?"}


def facts(text, truncated=False):
    return parse_selection(text, "FACTS", tuple(FACTS), 2, FACTS, truncated)


def row(text, truncated=False):
    return parse_selection(text, "ROW", tuple(ROWS), 1, ROWS, truncated)


@pytest.mark.parametrize(
    "text, expected",
    [
        # the requested line, as before
        ("FACTS: 2", (2,)),
        (" facts :  3 , 2 .", (3, 2)),
        ("FACTS: NONE", ()),
        ("FACTS: unknown.", ()),
        ("FACTS: 2 and 3", (2, 3)),
        # the line followed by an explanation
        ("FACTS: 2\nbecause she has to go all the time", (2,)),
        ("FACTS: 2. She needs to urinate much more often than usual.", (2,)),  # SmolLM2-135M, real
        ("FACTS: 4 - she says she has no fever", (4,)),
        ("FACTS: 4 (no fever)", (4,)),
        ("FACTS: 2, 3; the urine and the tenderness", (2, 3)),
        ("FACTS: 4 because she has no fever", (4,)),
        ("FACTS: NONE. None of the facts is about travel.", ()),
        ("FACTS: 2, 3\n2. She needs to urinate much more often than usual.\n3. She has mild tenderness above the pubic bone.", (2, 3)),
        ("FACTS: 2\nFACTS: 2", (2,)),  # the same answer twice
        ("FACTS: 3, 2\nFACTS: 2, 3", (3, 2)),
        ("**FACTS:** 2", (2,)),
        ("`FACTS: 4`", (4,)),
        # numbered facts over several lines, each quoted word for word
        ("2. She needs to urinate much more often than usual.\n3. She has mild tenderness above the pubic bone", (2, 3)),
        ("4) she has no fever", (4,)),
        ("- 6. She is sexually active with one partner and uses condoms.", (6,)),
        ("FACTS:\n2. She needs to urinate much more often than usual.", (2,)),
    ],
)
def test_selection_accepts_unambiguous_forms(text, expected):
    res = facts(text)
    assert res.ok, res.error
    assert res.value == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ROW: 2", (2,)),
        ("ROW: 3 - it asks whether the laptop stays hot when idle", (3,)),
        ("ROW: 1\nYes, the fan is loud when it is hot.", (1,)),
        ("Yes, ROW: 1", (1,)),  # the yes/no question answered first
        ("No.\nROW: NONE", ()),
        ("yes - ROW: 2 (the vents)", (2,)),
        ("3. Does the laptop stay hot when it is idle?", (3,)),
        ("ROW:\n3. Does the laptop stay hot when it is idle?", (3,)),
    ],
)
def test_selection_accepts_a_row_with_an_explanation_or_a_yes_no(text, expected):
    res = row(text)
    assert res.ok, res.error
    assert res.value == expected


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("The doctor's question is: Do you smoke?", "must start with 'FACTS:'"),  # SmolLM2-135M, real
        ("Sure! FACTS: 2", "must start with 'FACTS:'"),
        ("The answer is FACTS: NONE", "must start with 'FACTS:'"),
        ("FFACTS: 2", "must start with 'FACTS:'"),
        ("Nobody FACTS: 2", "must start with 'FACTS:'"),
        ("FACTS:", "no number"),
        ("FACTS: two", "not a whole number"),
        ("FACTS: 9", "outside the list"),
        ("FACTS: 1", "outside the list"),  # not offered (revealed already)
        ("FACTS: 2, 3, 4", "at most 2"),
        ("FACTS: 2, 2", "repeats"),
        ("FACTS: 2.5", "whole numbers"),
        ("FACTS: 99999999999", "too long"),
        ("FACTS: 2 or 3", "'or'"),
        ("FACTS: 2 maybe", "'maybe'"),
        ("FACTS: NONE, but 3 is close", "'but'"),
        ("FACTS: 2. Also 3", "'Also'"),
        ("FACTS: 2 - 3", "another number"),
        ("FACTS: 2-4", "another number"),
        ("FACTS: 2. 3. She has mild tenderness above the pubic bone.", "another number"),
        ("FACTS: 2\nFACTS: 3", "single line"),
        ("FACTS: NONE\nFACTS: 4", "single line"),
        ("FACTS: 2. She needs to urinate much more often than usual.\nFACTS: 3", "single line"),  # SmolLM2-135M, real
        ("FACTS: 2\nFact 3 fits as well", "other numbers of the list ([3])"),
        ("FACTS: NONE. Fact 4 is close", "other numbers of the list ([4])"),
        ("FACTS: 4 (see item 6)", "other numbers of the list ([6])"),
        # lists that are not word-for-word quotes of the items offered
        ("2. She needs to urinate often.\n3. She has mild tenderness above the pubic bone.", "does not quote"),
        ("2. She needs to urinate much more often than usual.\n5. She has no fever.", "does not quote"),
        ("2. She needs to urinate much more often than usual.\nThat is all.", "one numbered item"),
        ("2. She needs to urinate much more often than usual.\n3. She has mild tenderness above the pubic bone.\n4. She has no fever.", "at most 2"),
        ("FACTS:\n2. She needs to urinate often.", "does not quote"),
    ],
)
def test_selection_rejects_ambiguous_or_invalid_replies(text, fragment):
    res = facts(text)
    assert not res.ok and res.value is None
    assert fragment in res.error


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("1. No, the fan does not make any noise when the laptop is hot.\n2. The laptop stays hot", "does not quote"),  # real
        ("ROW: 1. Does the fan make any noise when the laptop is hot?\nROW: 2. Are the air vents free of dust?", "single line"),  # real
        ("RROW: NONE", "must start with 'ROW:'"),  # SmolLM2-135M, real
        ("ROW: 1, 2", "at most 1"),
        ("ROW: 1 or 2", "'or'"),
        ("Yes, ROW: 1 or 2", "'or'"),
        ("Yes. The fan is loud.", "must start with 'ROW:'"),  # a yes/no with no row: which check?
        ("ROW: 4", "outside the list"),
        ("ROW: 2\nNo, but row 1 is close", "other numbers of the list ([1])"),
    ],
)
def test_selection_rejects_rows_that_are_ambiguous(text, fragment):
    res = row(text)
    assert not res.ok and fragment in res.error


def test_selection_cut_by_the_length_cap_is_read_only_where_the_answer_ended():
    listed = "2. She needs to urinate much more often than usual.\n3. She has mild tenderness above the pubic bone"
    assert facts(listed).value == (2, 3)
    assert "cut off" in facts(listed, truncated=True).error  # SmolLM2-135M, real: more items may have followed
    assert "cut off" in facts("FACTS: 2, 3", truncated=True).error
    assert "cut off" in facts("FACTS: 2,", truncated=True).error
    assert facts("FACTS: 2, 3 - she needs to urin", truncated=True).value == (2, 3)
    assert facts("FACTS: 2\nShe needs to", truncated=True).value == (2,)
    assert facts("FACTS: NONE. Nothing about tr", truncated=True).value == ()


def test_selection_list_form_needs_the_offered_texts():
    text = "4. She has no fever."
    assert facts(text).value == (4,)
    res = parse_selection(text, "FACTS", tuple(FACTS), 2)
    assert not res.ok and "must start with 'FACTS:'" in res.error


@pytest.mark.parametrize("options", [None, {}, {"x": "y"}, 7])
def test_selection_odd_options_never_raise(options):
    res = parse_selection("FACTS: 2", "FACTS", (1, 2), 2, options)
    assert res.ok == (options is None or options == {})
    assert res.ok or "offered texts" in res.error
