"""The parquet files `arew prepare` writes load in verl's RLHFDataset and rebuild the same episodes."""

import json

import numpy as np
import pytest
from omegaconf import OmegaConf
from verl.utils.dataset.rl_dataset import RLHFDataset

from arew.cli import main as arew_main
from arew.envs.registry import make_env


@pytest.mark.parametrize("task", ["pe-g-s2", "pe-f-d8"])
async def test_prepared_rows_through_verl_dataset(task, tmp_path, chat_tokenizer):
    arew_main(["prepare", task, "--out", str(tmp_path), "--n-train", "6", "--n-val", "2", "--n-test", "2", "--seed", "4"])
    config = OmegaConf.create(
        {"max_prompt_length": 4096, "filter_overlong_prompts": True, "cache_dir": str(tmp_path / "cache")}
    )
    dataset = RLHFDataset(str(tmp_path / "train.parquet"), chat_tokenizer, config)
    assert len(dataset) == 6
    item = dataset[0]
    assert item["agent_name"] == "arew_agent"
    extra_info = item["extra_info"]
    env = make_env(extra_info["task"], extra_info, extra_info["seed"])  # parquet's arrays rebuild the episode
    assert [m["content"] for m in item["raw_prompt"]] == [m["content"] for m in env.initial_messages()]
    assert np.allclose(json.loads(item["reward_model"]["ground_truth"]), extra_info["w_star"])
    # the episode behaves: an invalid first action is labelled -1 and does not end it
    step = await env.act("<interact>nonsense</interact>")
    assert step.critique == -1 and not step.done
