import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arew.envs.registry import make_env, task_names
from arew_preference.data import build_rows, prepare
from arew_preference.generator import MAX_BASE_COS, VARIANTS, default_cosine, generate_splits, instance_key


def test_registry_lists_the_four_pe_tasks_and_checks_the_row():
    assert {"pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8"} <= set(task_names())
    info = build_rows("pe-f-d8", 1, 1, 1, 0)["train"][0]["extra_info"]
    env = make_env("pe-f-d8", info, 0)
    assert (env.max_turns, env.n_attrs, env.subset_size) == (12, 8, 8)
    with pytest.raises(ValueError):
        make_env("pe-g-s2", info, 0)
    with pytest.raises(KeyError):
        make_env("no-such-task", info, 0)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_generated_instances_follow_the_variant(name):
    v = VARIANTS[name]
    rows = generate_splits(v, {"train": 40}, seed=1)["train"]
    items = np.array([r["items"] for r in rows])
    w = np.array([r["w_star"] for r in rows])
    assert items.shape == (40, 10, v.n_attrs) and items.min() >= 1 and items.max() <= 5
    assert all(len(np.unique(it, axis=0)) == 10 for it in items)
    assert w.min() >= 0 and w.max() <= 1 and np.all(default_cosine(w) <= MAX_BASE_COS)
    assert np.allclose(w, w.round(2))
    assert {r["task"] for r in rows} == {name} and rows[0]["max_turns"] == v.max_turns


def test_splits_disjoint_reproducible_and_independent_of_other_split_sizes():
    v = VARIANTS["pe-g-s3"]
    a = generate_splits(v, {"train": 50, "validation": 20, "test": 20}, seed=7)
    b = generate_splits(v, {"train": 50, "validation": 20, "test": 20}, seed=7)
    c = generate_splits(v, {"train": 5, "validation": 20, "test": 20}, seed=7)
    d = generate_splits(v, {"train": 50, "validation": 20, "test": 20}, seed=8)
    assert a == b
    e = generate_splits(v, {"train": 50, "validation": 20, "test": 3}, seed=7)
    assert a["test"] == c["test"] and a["validation"] == c["validation"] == e["validation"]
    assert a["test"] != d["test"]
    keys = {s: {instance_key(r) for r in rows} for s, rows in a.items()}
    assert all(len(keys[s]) == len(a[s]) for s in a)
    assert not (
        keys["train"] & keys["test"]
        or keys["train"] & keys["validation"]
        or keys["test"] & keys["validation"]
    )
    assert [r["index"] for r in a["train"]] == list(range(50))


def test_parquet_round_trip(tmp_path):
    paths = prepare("pe-g-s2", tmp_path, n_train=6, n_val=3, n_test=4, seed=0)
    assert {p.name for p in paths.values()} == {"train.parquet", "validation.parquet", "test.parquet"}
    expected = build_rows("pe-g-s2", 6, 3, 4, 0)
    schema = pq.read_schema(paths["train"])
    prompt_type = schema.field("prompt").type
    assert pa.types.is_list(prompt_type) and pa.types.is_struct(prompt_type.value_type)
    assert {f.name for f in prompt_type.value_type} == {"role", "content"}
    for split, path in paths.items():
        df = pd.read_parquet(path)
        assert len(df) == len(expected[split])
        assert set(df.columns) == {
            "data_source",
            "prompt",
            "ability",
            "reward_model",
            "extra_info",
            "agent_name",
        }
        row, want = df.iloc[0], expected[split][0]
        assert row["data_source"] == "arew/pe-g-s2" and row["ability"] == "active_reasoning"
        assert row["agent_name"] == "arew_agent" and row["extra_info"]["split"] == split
        assert [dict(m) for m in row["prompt"]] == want["prompt"]
        assert row["reward_model"]["style"] == "rule"
        assert json.loads(row["reward_model"]["ground_truth"]) == want["extra_info"]["w_star"]
        env = make_env(row["extra_info"]["task"], row["extra_info"], int(row["extra_info"]["seed"]))
        assert env.initial_messages() == want["prompt"]
        assert np.array_equal(env.w_star, want["extra_info"]["w_star"])
    table = pq.read_table(paths["test"]).to_pylist()
    assert table[0]["extra_info"] == expected["test"][0]["extra_info"]


def test_envs_package_never_imports_verl_ray_or_the_rest_of_arew():
    """Of arew only the chat client, the config schema and the plugin registry (the import contract says the same)."""
    code = (
        "import sys, arew.envs.registry, arew_preference.data, arew.envs.parsing;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'verl', 'ray'}"
        " or (m.startswith('arew.') and not m.startswith(('arew.envs', 'arew.chat', 'arew.schema', 'arew.plugins'))));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
