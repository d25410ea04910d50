import json

import pandas as pd
import pytest

from arew.envs.registry import make_env, prepare_task, task_names
from arew_mediq.data import build_splits, clean_fact, initial_information, normalize_case, read_source


def case(i, answer="B", n_facts=4, **overrides):
    record = {
        "id": i,
        "question": "Which of the following is the most likely diagnosis?",
        "context": [f"A {20 + i}-year-old man presents to the clinic with a cough.", "He smokes.", "He has a fever."],
        "context_len": 3,
        "options": {"A": "Asthma", "B": "Pneumonia", "C": "Bronchitis", "D": "Tuberculosis"},
        "answer": "Pneumonia",
        "answer_idx": answer,
        "explanation": "",
        "facts": [f"1. Patient is a {20 + i}-year-old man.", "2. Patient presents with a cough."]
        + [f"{k}. Finding number {k} of case {i} is present." for k in range(3, 3 + n_facts)],
        "patient": {"gender": "Male"},
    }
    record.update(overrides)
    return record


def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8")
    return path


def test_normalize_case_fields_known_facts_and_rejections():
    c = normalize_case(case(3))
    assert c["task"] == "mediq" and c["case_id"] == "3" and c["answer_idx"] == 1 and c["max_turns"] == 8
    assert c["initial_info"] == "A 23-year-old man presents to the clinic with a cough."
    assert c["options"] == ["Asthma", "Pneumonia", "Bronchitis", "Tuberculosis"]
    assert c["facts"][0] == "Patient is a 23-year-old man." and len(c["facts"]) == 6
    assert c["known_fact_ids"] == [0, 1]  # both restate the opening sentence
    assert normalize_case(case(1, answer="E")) is None
    assert normalize_case(case(1, options={"A": "x", "B": "y"})) is None
    assert normalize_case(case(1, context=[])) is None
    assert normalize_case(case(1, n_facts=1)) is None  # one open fact is too few
    assert normalize_case({"id": 1}) is None and normalize_case(case(1, facts=None)) is None


def test_fact_cleaning_and_short_first_sentence():
    assert clean_fact("12. Fever.") == "Fever." and clean_fact("- Sex: F") == "Sex: F" and clean_fact("3) x") == "x"
    assert initial_information(["Patient Information.", "Age: 1 day.", "Sex: F.", "Born at term."]).startswith(
        "Patient Information. Age: 1 day. Sex: F."
    )


def test_splits_deterministic_disjoint_capped_and_test_stable(tmp_path, caplog):
    records = [case(i) for i in range(30)] + [case(99, answer="Z")]
    a = build_splits(records, 10, 5, 6, seed=1)
    assert a == build_splits(records, 10, 5, 6, seed=1)
    assert {s: len(r) for s, r in a.items()} == {"test": 6, "validation": 5, "train": 10}
    ids = {s: {r["case_id"] for r in rows} for s, rows in a.items()}
    assert not (ids["test"] & ids["train"] or ids["test"] & ids["validation"] or ids["train"] & ids["validation"])
    assert "99" not in set().union(*ids.values())
    assert build_splits(records, 2, 5, 6, seed=1)["test"] == a["test"]
    assert build_splits(records, 10, 5, 6, seed=2)["test"] != a["test"]
    assert [r["index"] for r in a["train"]] == list(range(10)) and all(r["split"] == "train" for r in a["train"])
    capped = build_splits(records, 100, 5, 6, seed=1)
    assert len(capped["train"]) == 19 and "train gets 19" in caplog.text
    with pytest.raises(ValueError):
        build_splits(records, 1, 20, 20, seed=1)
    with pytest.raises(ValueError):
        build_splits([case(1), case(1)], 1, 0, 0, seed=1)


def test_read_source_rejects_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(case(1)) + "\n{oops\n")
    with pytest.raises(ValueError, match="line 2"):
        read_source(path)


def test_prepare_writes_verl_parquet_that_rebuilds_episodes(tmp_path):
    assert "mediq" in task_names()
    source = write_jsonl(tmp_path / "cases.jsonl", [case(i) for i in range(12)])
    paths = prepare_task("mediq", tmp_path / "out", n_train=6, n_val=2, n_test=3, seed=0, source=str(source))
    assert set(paths) == {"train", "validation", "test"}
    df = pd.read_parquet(paths["train"])
    assert len(df) == 6 and set(df.columns) >= {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
        "agent_name",
    }
    row = df.iloc[0]
    assert row["agent_name"] == "arew_agent" and row["data_source"] == "arew/mediq"
    info = row["extra_info"]
    assert info["task"] == "mediq" and info["split"] == "train" and "seed" in info and "index" in info
    env = make_env("mediq", info, int(info["seed"]))
    assert [m["content"] for m in env.initial_messages()] == [m["content"] for m in row["prompt"]]
    assert row["reward_model"]["ground_truth"] == "ABCD"[env.gold]
    with pytest.raises(ValueError, match="--source"):
        prepare_task("mediq", tmp_path / "x", 1, 1, 1, 0)


def test_real_mediq_file_prepares(tmp_path, real_data_dir):
    source = real_data_dir / "mediq" / "all_dev_good.jsonl" if real_data_dir else None
    if source is None or not source.is_file():
        pytest.skip("real data not present")
    paths = prepare_task("mediq", tmp_path, n_train=5000, n_val=128, n_test=300, seed=0, source=str(source))
    sizes = {s: len(pd.read_parquet(p)) for s, p in paths.items()}
    assert sizes["test"] == 300 and sizes["validation"] == 128 and sizes["train"] > 700


def test_small_source_says_which_splits_to_pass(tmp_path, capsys):
    from arew.cli import main as arew_main

    source = write_jsonl(tmp_path / "small.jsonl", [case(i) for i in range(40)])
    with pytest.raises(SystemExit, match=r"only 40 usable MediQ cases.*--n-test 300 \+ --n-val 128.*--n-test 8 --n-val 4"):
        arew_main(["prepare", "mediq", "--out", str(tmp_path / "out"), "--source", str(source)])
    arew_main(["prepare", "mediq", "--out", str(tmp_path / "out"), "--source", str(source), "--n-test", "8", "--n-val", "4"])
    assert len(pd.read_parquet(tmp_path / "out" / "test.parquet")) == 8


def test_answer_text_naming_another_option_is_skipped_and_reported(caplog):
    spaced = {**case(51), "answer": " pneumonia. "}
    records = [case(i) for i in range(12)] + [case(50, answer="C"), spaced]
    splits = build_splits(records, 20, 2, 2, seed=0)
    ids = {r["case_id"] for rows in splits.values() for r in rows}
    assert "50" not in ids and "51" in ids  # "C" is Bronchitis but the text says Pneumonia; "51" differs only in case
    assert "skipped 1 cases whose answer text does not name the option answer_idx names: it names option B (ids 50)" in caplog.text


VASCULITIS = {"A": "IgA vasculitis", "B": "Kawasaki disease", "C": "Immune thrombocytopenic purpura", "D": "Septic arthritis"}


@pytest.mark.parametrize(
    ("answer", "kept", "why"),
    [
        ("Henoch-Schönlein vasculitis", True, "another wording of"),  # shares the option's words
        ("IgA  Vasculitis.", True, None),  # spacing, case and the full stop only
        ("vasculitis (IgA)", True, "another wording of"),
        ("Henoch-Schönlein purpura", True, "a known synonym of"),  # shares a word with option C only: the table knows it
        ("Kawasaki disease", False, "it names option B"),  # another option, exactly
        ("Thrombocytopenic purpura", False, "it is closer to option C"),
        ("Thrombocytopenic vasculitis", False, "it shares as many words with option C"),  # a tie: which option is meant is unknown
        ("Acute rheumatic fever", False, "it shares no word with any option"),
    ],
)
def test_the_answer_text_check_accepts_another_wording_and_says_what_it_skips(caplog, answer, kept, why):
    records = [case(i) for i in range(12)] + [{**case(60, answer="A", options=VASCULITIS), "answer": answer}]
    with caplog.at_level("INFO"):
        splits = build_splits(records, 20, 2, 2, seed=0)
    assert ("60" in {r["case_id"] for rows in splits.values() for r in rows}) == kept
    if why is not None:
        assert why in caplog.text and "60" in caplog.text
