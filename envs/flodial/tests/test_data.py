import json
from collections import Counter

import pandas as pd
import pytest

from arew.envs.registry import make_env, prepare_task, task_names
from arew_flodial.data import (
    VARIANTS,
    assign_splits,
    build_splits,
    candidate_sets,
    gold_faults,
    separating_questions,
)
from arew_flodial.flowchart import load_flowcharts, parse_flowchart

# q1 -yes-> q2 -yes-> q4 -yes-> F6
#                          -no->  q7 -yes-> F8 / -no-> F9
#              -no->  F5
#    -no->  q3 -yes-> F10
#              -no->  q11 -yes-> F12 / -no-> F13
EDGES = {
    "1": {"yes": "2", "no": "3"},
    "2": {"yes": "4", "no": "5"},
    "4": {"yes": "6", "no": "7"},
    "7": {"yes": "8", "no": "9"},
    "3": {"yes": "10", "no": "11"},
    "11": {"yes": "12", "no": "13"},
}
QUESTIONS = ["1", "2", "3", "4", "7", "11"]
FAULTS = ["5", "6", "8", "9", "10", "12", "13"]


def chart(name, problem="Your device is broken.", edges=EDGES, fault_text=None):
    nodes = {
        q: {"label": f"q{q}", "terminal": False, "utterance": f"Is {name} check number {q} passing?"} for q in QUESTIONS
    }
    for f in FAULTS:
        text = (fault_text or {}).get(f, f"{name} fault {f} is present.")
        nodes[f] = {"label": f"fix {f}", "terminal": True, "utterance": text}
    return {
        "name": name,
        "category": "test",
        "problem_description": problem,
        "nodes": nodes,
        "edges": edges,
        "supporting_faqs": [],
    }


def write_charts(folder, charts, extra=None):
    ks = folder / "knowledge-sources"
    ks.mkdir(parents=True)
    for c in charts:
        (ks / f"{c['name']}.json").write_text(json.dumps(c))
    for name, text in (extra or {}).items():
        (ks / name).write_text(text)
    return folder


def golds_by_fault(raw):
    return {g.fault: g for g in gold_faults([parse_flowchart(raw)])}


def test_paths_tables_and_divergence():
    fc = parse_flowchart(chart("a"))
    paths = fc.paths()
    assert list(paths) == FAULTS and fc.root == "1"
    assert paths["9"] == (("1", "yes"), ("2", "yes"), ("4", "no"), ("7", "no"))
    g = golds_by_fault(chart("a"))["9"]
    assert g.divergence == {"5": 1, "6": 2, "8": 3, "10": 0, "12": 0, "13": 0}
    assert separating_questions(g, ("5", "6", "8", "10")) == 4
    assert separating_questions(g, ("10", "12", "13", "5")) == 2
    assert separating_questions(g, ("10", "12", "13", "8")) == 2


def test_missing_branch_cycle_and_duplicate_fault_texts():
    edges = {**EDGES, "11": {"yes": "12"}, "7": {"yes": "8", "no": "1"}}  # F13, F9 unreachable; 7->1 a cycle
    fc = parse_flowchart(chart("b", edges=edges))
    assert set(fc.paths()) == {"5", "6", "8", "10", "12"}
    dup = golds_by_fault(chart("c", fault_text={"12": "Same text.", "13": "same text."}))
    assert "13" not in dup["12"].divergence and "12" in dup["9"].divergence and "13" not in dup["9"].divergence
    with pytest.raises(ValueError):
        parse_flowchart({"name": "x"})


def test_easy_and_hard_candidate_sets_follow_the_separating_question_count():
    golds = golds_by_fault(chart("a"))
    easy, hard = VARIANTS["flodial-easy"], VARIANTS["flodial-hard"]
    for g in golds.values():
        assert all(1 <= separating_questions(g, s) <= 2 for s in candidate_sets(g, easy))
        assert all(separating_questions(g, s) >= 3 for s in candidate_sets(g, hard))
    assert candidate_sets(golds["10"], hard) == []  # every distractor leaves at q1 or q3
    assert len(candidate_sets(golds["10"], easy)) == 15  # any 4 of the 6 others
    # gold 9: one or two of {10,12,13} (exit q1) with the rest from {5 (q2), 6 (q4), 8 (q7)}: 3 + 9 sets
    assert len(candidate_sets(golds["9"], hard)) == 12


def test_splits_by_gold_fault_are_disjoint_deterministic_and_sized(tmp_path):
    charts = load_flowcharts(write_charts(tmp_path, [chart("a"), chart("b"), chart("c")], {"notes.json": '{"faq": 1}'}))
    assert [c.name for c in charts] == ["a", "b", "c"]
    golds = gold_faults(charts)
    split = assign_splits(golds, 0)
    assert {s: len(g) for s, g in split.items()} == {"test": 4, "validation": 2, "train": 15}
    for name in VARIANTS:
        a = build_splits(charts, name, 40, 6, 10, seed=0)
        assert a == build_splits(charts, name, 40, 6, 10, seed=0)
        keys = {s: {(r["flowchart"], r["candidate_ids"][r["gold_idx"]]) for r in rows} for s, rows in a.items()}
        assert not (
            keys["train"] & keys["test"] or keys["train"] & keys["validation"] or keys["test"] & keys["validation"]
        )
        tasks = [(r["flowchart"], frozenset(r["candidate_ids"]), r["candidate_ids"][r["gold_idx"]]) for r in a["train"]]
        assert len(set(tasks)) == len(tasks) == 40
        for r in a["test"] + a["train"]:
            assert len(r["candidates"]) == 5 and len(set(r["candidate_ids"])) == 5 and r["task"] == name
            assert len(r["table_questions"]) == len(r["table_answers"]) >= 1 and r["max_turns"] == 10
            lo, hi = VARIANTS[name].min_separating, VARIANTS[name].max_separating
            assert lo <= r["separating_questions"] <= hi
        per_gold = Counter((r["flowchart"], r["candidate_ids"][r["gold_idx"]]) for r in a["train"])
        assert max(per_gold.values()) - min(per_gold.values()) <= 1 or name == "flodial-hard"
        assert Counter(r["gold_idx"] for r in a["train"]).keys() - {0, 1, 2, 3, 4} == set()


def test_split_runs_out_of_distinct_tasks_with_a_warning(tmp_path, caplog):
    charts = load_flowcharts(write_charts(tmp_path, [chart("a")]))
    out = build_splits(charts, "flodial-hard", 10_000, 0, 0, seed=0)
    assert 0 < len(out["train"]) < 10_000 and "distinct tasks" in caplog.text


def test_table_is_the_gold_path_with_its_answers(tmp_path):
    charts = load_flowcharts(write_charts(tmp_path, [chart("a")]))
    rows = build_splits(charts, "flodial-hard", 200, 0, 0, seed=0)["train"]
    row = next(r for r in rows if r["candidate_ids"][r["gold_idx"]] == "9")
    assert row["table_questions"] == [f"Is a check number {q} passing?" for q in ("1", "2", "4", "7")]
    assert row["table_answers"] == ["Yes", "Yes", "No", "No"]
    assert row["candidates"][row["gold_idx"]] == "a fault 9 is present." and row["problem"] == "Your device is broken."


def test_prepare_writes_parquet_for_both_variants(tmp_path):
    assert {"flodial-easy", "flodial-hard"} <= set(task_names())
    source = write_charts(tmp_path / "src", [chart("a"), chart("b"), chart("c")])
    for name in ("flodial-easy", "flodial-hard"):
        paths = prepare_task(
            name, tmp_path / name, n_train=8, n_val=2, n_test=3, seed=0, source=str(source / "knowledge-sources")
        )
        df = pd.read_parquet(paths["test"])
        assert len(df) == 3 and (df["agent_name"] == "arew_agent").all() and (df["data_source"] == f"arew/{name}").all()
        info = df.iloc[0]["extra_info"]
        env = make_env(name, info, int(info["seed"]))
        assert [m["content"] for m in env.initial_messages()] == [m["content"] for m in df.iloc[0]["prompt"]]
        assert df.iloc[0]["reward_model"]["ground_truth"] == str(env.gold + 1)
    with pytest.raises(ValueError, match="--source"):
        prepare_task("flodial-easy", tmp_path / "x", 1, 1, 1, 0)
    with pytest.raises(ValueError, match="no --source"):
        prepare_task("pe-g-s2", tmp_path / "x", 1, 1, 1, 0, source="x")
    with pytest.raises(FileNotFoundError):
        prepare_task("flodial-easy", tmp_path / "x", 1, 1, 1, 0, source=str(tmp_path / "missing"))


def test_real_flowcharts_prepare(tmp_path, real_data_dir):
    source = real_data_dir / "flodial" if real_data_dir else None
    if source is None or not (source / "knowledge-sources").is_dir():
        pytest.skip("real data not present")
    for name in ("flodial-easy", "flodial-hard"):
        paths = prepare_task(name, tmp_path / name, n_train=2048, n_val=128, n_test=300, seed=0, source=str(source))
        assert {s: len(pd.read_parquet(p)) for s, p in paths.items()} == {"train": 2048, "validation": 128, "test": 300}
