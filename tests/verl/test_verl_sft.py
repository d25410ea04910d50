"""verl's own SFT trainer (``arew.verl_plugin.sft``) on the CPU backend, on the lab's transcripts and a tiny random Qwen2
(64 wide, one layer): what it trains on, that it trains, and that what it saves is the model a later stage loads.

Cost: about 30 s on 2 idle cores, 45 s on busy ones: one 3-step run (16-27 s, about 10 s of it torchrun and verl
starting and the model's export), one run that fails at start-up (10-17 s), the transcripts and the tokenizer (1 s).
"""

from __future__ import annotations

import math

import pytest
import torch

from arew.lab.lm.warm_start import IGNORE, WarmStart, encode, transcripts, untrained_model
from arew.verl_plugin.sft import LOG, run_sft, sft_losses

pytestmark = pytest.mark.e2e

CONFIG = WarmStart(inform=1.0, update=1.0, episodes=8, hidden_size=64, layers=1, heads=1, kv_heads=1, vocab_size=400)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The transcripts and the random-weight model's Hugging Face folder, with the tokenizer the model was built with."""
    folder = tmp_path_factory.mktemp("model")
    conversations, _ = transcripts(CONFIG)
    built, tokenizer = untrained_model(CONFIG, conversations, folder)
    built.save_pretrained(folder)
    return folder, conversations, tokenizer


@pytest.fixture(scope="module")
def trained(model, tmp_path_factory):
    folder, conversations, _ = model
    out = tmp_path_factory.mktemp("sft")
    return run_sft(folder, conversations, out, steps=3, batch_size=4, learning_rate=3e-3), out


def test_verl_sees_the_token_ids_of_encode_and_trains_one_more_token_per_assistant_turn(model):
    """verl's MultiTurnSFTDataset renders each transcript to the ids the lab's own SFT uses; its loss mask is encode's
    plus the newline after each assistant <|im_end|> (verl masks the whole rendered message after its generation prompt)."""
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    folder, conversations, tokenizer = model
    data = folder.parent / "messages.parquet"
    pd.DataFrame({"messages": conversations}).to_parquet(data, index=False)
    settings = OmegaConf.create({"pad_mode": "no_padding", "max_length": 100_000, "truncation": "error"})
    dataset = MultiTurnSFTDataset(str(data), tokenizer, settings)
    newline = tokenizer("\n", add_special_tokens=False).input_ids
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for index, messages in enumerate(conversations):
        ids, labels = encode(tokenizer, messages)
        item = dataset[index]
        assert item["input_ids"].tolist() == ids
        extra = [
            i for i, (verl, ours) in enumerate(zip(item["loss_mask"].tolist(), labels)) if verl != (ours != IGNORE)
        ]
        turns = sum(message["role"] == "assistant" for message in messages)
        assert len(extra) == turns and all(
            item["loss_mask"][i] == 1 and [ids[i]] == newline and ids[i - 1] == end for i in extra
        )


def test_verl_sft_trains_and_saves_a_model_transformers_loads_with_the_input_tokenizer(model, trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, conversations, tokenizer = model
    path, out = trained
    losses = sft_losses(out)
    assert len(losses) == 3 and all(math.isfinite(loss) for loss in losses)
    assert losses[-1] < losses[0]  # fp32 and verl's fixed data order: the same numbers every run
    before, after = AutoModelForCausalLM.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(path)
    assert after.dtype == torch.float32  # verl's export says bf16 over fp32 weights; run_sft puts the config back
    changed = [
        name for (name, old), new in zip(before.named_parameters(), after.parameters()) if not torch.equal(old, new)
    ]
    assert len(changed) == len(list(before.parameters()))
    saved = AutoTokenizer.from_pretrained(path)
    assert all(encode(saved, messages) == encode(tokenizer, messages) for messages in conversations)


def test_a_failed_run_names_the_cause_and_its_log(model, tmp_path):
    folder, conversations, _ = model
    # FSDP1, verl's default strategy, needs an accelerator
    with pytest.raises(RuntimeError, match=r"sync_module_states.*; its log: .*sft\.log"):
        run_sft(folder, conversations, tmp_path, steps=1, batch_size=4, overrides=["engine.strategy=fsdp"])
    assert (tmp_path / LOG).is_file()


def test_a_batch_larger_than_the_data_is_refused_before_any_process_starts(model, tmp_path):
    folder, conversations, _ = model
    with pytest.raises(ValueError, match="batch_size"):
        run_sft(folder, conversations, tmp_path, steps=1, batch_size=len(conversations) + 1)
    assert not (tmp_path / LOG).exists()


def test_a_warm_start_built_by_verls_trainer_starts_where_the_labs_own_loop_does(tmp_path):
    """``sft_trainer="verl"`` through the lab's build (arew.lab.lm.warm_start.build): the same model and batches give
    the same first-step loss as the lab's own loop, up to verl's extra newline per assistant turn in the mask (about
    20 s: one verl run of 2 steps)."""
    import json
    from dataclasses import replace

    from transformers import AutoModelForCausalLM

    from arew.lab.lm.warm_start import RECORD, build

    lab = build(replace(CONFIG, sft_steps=2, batch_size=4), tmp_path, log=lambda _: None)
    verl = build(replace(CONFIG, sft_steps=2, batch_size=4, sft_trainer="verl"), tmp_path, log=lambda _: None)
    first = [json.loads((folder / RECORD).read_text())["sft_loss_first"] for folder in (lab, verl)]
    assert lab != verl and abs(first[0] - first[1]) < 0.01 * first[0]
    assert (verl / "verl-sft" / LOG).is_file() and not (verl / "verl-sft" / "checkpoints").exists()
    assert AutoModelForCausalLM.from_pretrained(verl).dtype == torch.float32
