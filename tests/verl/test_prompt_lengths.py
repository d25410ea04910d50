"""The start-up count of prompts over ``data.max_prompt_length`` agrees with verl's own dataset filter, and a run
whose prompts verl would all drop (or fail on) is refused naming the key, the file and the longest prompt."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from omegaconf import OmegaConf
from verl.utils.dataset.rl_dataset import RLHFDataset

from arew.verl_plugin.prompt_lengths import check_prompt_lengths, measure

WORDS = "ask look and listen before you answer the question".split()


@pytest.fixture
def prompts(tmp_path):
    """Eight prompts of growing length in a verl parquet file."""
    rows = [{"prompt": [{"role": "user", "content": " ".join(WORDS * (k + 1))}], "data_source": "arew/test"} for k in range(8)]
    path = tmp_path / "train.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def _config(path: str, limit: int, filtering: bool):
    return OmegaConf.create({
        "data": {"train_files": [path], "val_files": [], "max_prompt_length": limit, "filter_overlong_prompts": filtering},
        "actor_rollout_ref": {"model": {"path": "unused"}},
    })  # fmt: skip


def test_the_count_is_verl_s_dataset_filter(prompts, chat_tokenizer, tmp_path):
    longest = measure(prompts, chat_tokenizer, 10**6).longest_tokens
    for limit in (longest // 3, longest // 2, longest - 1, longest):
        counted = measure(prompts, chat_tokenizer, limit)
        kept = RLHFDataset(prompts, chat_tokenizer, OmegaConf.create({"max_prompt_length": limit, "filter_overlong_prompts": True, "cache_dir": str(tmp_path)}))
        assert counted.total - counted.over == len(kept), limit


def test_all_prompts_over_the_limit_are_refused_naming_the_key_and_the_longest(prompts, chat_tokenizer):
    longest = measure(prompts, chat_tokenizer, 10**6)
    with pytest.raises(ValueError) as refused:
        check_prompt_lengths(_config(prompts, 5, filtering=True), chat_tokenizer)
    message = str(refused.value)
    assert message.startswith("data.max_prompt_length: 8 of 8 prompts of train_files")
    assert f"row {longest.longest_row}, has {longest.longest_tokens}" in message and "num_samples=0" in message


def test_one_prompt_over_is_refused_without_the_filter_and_logged_with_it(prompts, chat_tokenizer, caplog):
    longest = measure(prompts, chat_tokenizer, 10**6).longest_tokens
    with pytest.raises(ValueError, match=r"1 of 8 prompts .*\(data.filter_overlong_prompts=false\)"):
        check_prompt_lengths(_config(prompts, longest - 1, filtering=False), chat_tokenizer)
    with caplog.at_level(logging.WARNING, logger="arew"):
        (measured,) = check_prompt_lengths(_config(prompts, longest - 1, filtering=True), chat_tokenizer)
    assert measured.over == 1 and "1 of 8 prompts" in caplog.text and "verl drops them" in caplog.text
    assert check_prompt_lengths(_config(prompts, longest, filtering=False), chat_tokenizer)[0].over == 0
