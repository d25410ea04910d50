"""transformers generation of one sequence: one turn's generation config and a seeded ``generate``.

Shared by the CPU rollout engine (:mod:`arew.verl_plugin.cpu.hf_rollout`) and ``arew eval``'s
local model (:mod:`arew.eval.local`), so that both sample the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def generation_config(
    model,
    tokenizer,
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    top_k: int = 0,
    repetition_penalty: float = 1.0,
    stop: Sequence[str] = (),
    **outputs,
):
    """One turn's transformers settings: greedy at temperature 0 (sampling knobs unset, so
    transformers does not warn), stop strings matched on text; ``outputs`` asks for extras such as logits."""
    from transformers import GenerationConfig

    sampled = temperature > 0
    return GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=sampled,
        temperature=temperature if sampled else None,
        top_p=top_p if sampled else None,
        top_k=max(top_k, 0) if sampled else None,  # vLLM's -1 (off) is transformers' 0
        repetition_penalty=repetition_penalty,
        stop_strings=list(stop) or None,
        eos_token_id=model.generation_config.eos_token_id or tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **outputs,
    )


def generate_seeded(model, tokenizer, prompt_ids: list[int], config, seed: int | None):
    """``generate`` for one prompt, replayable given ``seed`` (``None``: a fresh random one).

    The seed is torch's global one: the caller holds a lock so that no other generation
    draws from it or reseeds it meanwhile."""
    with torch.inference_mode():
        if seed is None:
            torch.seed()
        else:
            torch.manual_seed(seed)
        inputs = torch.tensor([prompt_ids], dtype=torch.long, device=model.device)
        return model.generate(
            input_ids=inputs,
            attention_mask=torch.ones_like(inputs),
            generation_config=config,
            tokenizer=tokenizer,  # stop strings are matched on text
        )
