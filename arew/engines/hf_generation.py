"""transformers generation: one turn's generation config and a seeded, batched ``generate``.

Shared by the CPU rollout engine (:mod:`arew.verl_plugin.cpu.hf_rollout`) and ``arew eval``'s
local model (:mod:`arew.eval.local`), so that both sample the same way. The rollout engine can
also cut a call short from another thread (an :class:`Interrupt`), for partial rollouts.
"""

from __future__ import annotations

import threading
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


class Interrupt(threading.Event):
    """Stops a :func:`generate_rows` call in progress from another thread: once set, every row stops after
    its next token. ``tokens`` counts the new tokens per row of the call in progress."""

    tokens = 0


def generate_batch(model, tokenizer, prompts: list[list[int]], config, seed: int | None, budgets: Sequence[int] | None = None):
    """``generate`` for several prompts at once, replayable given ``seed`` (``None``: a fresh random one).

    The prompts are left-padded into one batch. Each row is cut where it ended on its own: after its
    first end-of-sequence token or stop string, or at its budget of new tokens (``budgets``, default
    ``config.max_new_tokens`` each). Returns each row's new tokens and, when ``config`` asks for
    logits (``output_logits``), their logits (tokens x vocabulary), else ``None`` per row.

    The seed is torch's global one: the caller holds a lock so that no other generation
    draws from it or reseeds it meanwhile."""
    tokens, logits, _ = generate_rows(model, tokenizer, prompts, config, seed, budgets)
    return tokens, logits


def generate_rows(
    model, tokenizer, prompts: list[list[int]], config, seed: int | None, budgets: Sequence[int] | None = None, interrupt: Interrupt | None = None
):
    """:func:`generate_batch` that an ``interrupt`` may cut short; returns also whether each row ended on its own.

    Once ``interrupt`` is set (from another thread), every row stops after its next token; a row that had
    not ended on its own by then (end-of-sequence token, stop string, budget) keeps the tokens it has and
    is reported ``False``. Without an interrupt every row ends on its own."""
    from transformers import StoppingCriteria, StoppingCriteriaList, StopStringCriteria

    eos = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
    pad = config.pad_token_id if config.pad_token_id is not None else eos[0]
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    stopping = StoppingCriteriaList()
    if interrupt is not None:
        interrupt.tokens = 0

        class Interrupted(StoppingCriteria):  # checked after every token; all rows or none
            def __call__(self, input_ids, scores, **kwargs):
                interrupt.tokens = input_ids.shape[1] - width
                return torch.full((input_ids.shape[0],), interrupt.is_set(), dtype=torch.bool, device=input_ids.device)

        stopping.append(Interrupted())
    with torch.inference_mode():
        if seed is None:
            torch.seed()
        else:
            torch.manual_seed(seed)
        out = model.generate(
            input_ids=input_ids.to(model.device),
            attention_mask=attention_mask.to(model.device),
            generation_config=config,
            tokenizer=tokenizer,  # stop strings are matched on text
            stopping_criteria=stopping,
        )
    sequences = out.sequences if hasattr(out, "sequences") else out
    new = sequences[:, width:].cpu()
    ended = torch.isin(new, torch.tensor([token for token in eos if token is not None], dtype=torch.long))
    if config.stop_strings:
        # generate's own test, on every prefix: after which new token each row's text first ends in a stop string
        stop = StopStringCriteria(tokenizer, config.stop_strings)
        ended |= torch.stack([stop(sequences[:, : width + t + 1], None) for t in range(new.shape[1])], dim=1).cpu()
    first_end = torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, new.shape[1])
    cap = config.max_new_tokens or new.shape[1]  # generate's own limit
    limits = torch.tensor(list(budgets or [cap] * len(prompts))).clamp(max=cap)
    lengths = torch.minimum(first_end, limits).tolist()
    # without an end inside the row, only its budget (generate's max_new_tokens at most) ends it; short of that, the interrupt cut it
    on_its_own = (ended.any(dim=1) | (limits <= new.shape[1])).tolist()
    logits = torch.stack(out.logits, dim=1).cpu() if getattr(out, "logits", None) else None
    tokens = [new[row, :n] for row, n in enumerate(lengths)]
    return tokens, [None if logits is None else logits[row, :n] for row, n in enumerate(lengths)], on_its_own
