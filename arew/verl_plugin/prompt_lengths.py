"""The prompts longer than ``data.max_prompt_length``, counted at start-up with the run's own tokenizer.

verl measures a prompt as its chat template's tokens with the generation prompt (``RLHFDataset``'s
``maybe_filter_out_long_prompts``, text prompts), then either drops the longer ones silently
(``data.filter_overlong_prompts=true``: with every prompt dropped the run stops on torchdata's
``num_samples=0``, naming nothing) or fails on the first one it loads, mid-run (``truncation: error``).
:func:`check_prompt_lengths` measures them the same way before any of that: it refuses a run whose
prompts would all be dropped, or that would fail on one, naming the key, the file and the longest prompt,
and logs how many a filtering run drops.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import pyarrow.parquet as pq
from verl.utils.tokenizer import normalize_token_ids

logger = logging.getLogger("arew")


@dataclass(frozen=True)
class PromptLengths:
    """One file's prompts against the limit: how many, how many over it, the longest (row, tokens)."""

    path: str
    total: int
    over: int
    longest_row: int
    longest_tokens: int


def measure(path: str, tokenizer, max_prompt_length: int, prompt_key: str = "prompt", template_kwargs: dict | None = None) -> PromptLengths:
    """Every prompt of a parquet file tokenized as verl's dataset filter does (chat template, generation prompt)."""
    prompts = pq.read_table(path, columns=[prompt_key]).column(0).to_pylist()
    kwargs = {key: value for key, value in (template_kwargs or {}).items() if key not in ("tokenize", "return_dict", "return_tensors")}
    lengths = [len(normalize_token_ids(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs))) for messages in prompts]
    longest = max(range(len(lengths)), key=lengths.__getitem__, default=0)
    return PromptLengths(path, len(lengths), sum(n > max_prompt_length for n in lengths), longest, lengths[longest] if lengths else 0)


def check_prompt_lengths(config, tokenizer=None) -> list[PromptLengths]:
    """Refuse, naming ``data.max_prompt_length``, when verl would drop every prompt of a file or fail on one."""
    data = config.data
    limit = int(data.max_prompt_length)
    files = data_files(data)
    if files and tokenizer is None:
        from transformers import AutoTokenizer

        model = config.actor_rollout_ref.model
        location = model.get("tokenizer_path") or model.path
        try:
            tokenizer = AutoTokenizer.from_pretrained(location, trust_remote_code=data.get("trust_remote_code", False))
        except (OSError, ValueError) as error:  # verl's own loading of it fails next, with its message
            logger.warning("data.max_prompt_length: prompt lengths not checked, the tokenizer at %s does not load: %s", location, error)
            return []
    filtering = bool(data.get("filter_overlong_prompts", False))
    measured = []
    for key, path in files:
        lengths = measure(path, tokenizer, limit, data.get("prompt_key", "prompt"), data.get("apply_chat_template_kwargs"))
        measured.append(lengths)
        if lengths.over == 0:
            continue
        where = f"{lengths.over} of {lengths.total} prompts of {key} {path} are longer than {limit} tokens (the longest, row {lengths.longest_row}, has {lengths.longest_tokens})"
        if not filtering:
            raise ValueError(f"data.max_prompt_length: {where}; verl would stop on the first one it loads (data.filter_overlong_prompts=false): raise it to {lengths.longest_tokens}")
        if lengths.over == lengths.total:
            raise ValueError(f"data.max_prompt_length: {where}; verl would drop them all and stop with torchdata's num_samples=0: raise it to {lengths.longest_tokens}")
        logger.warning("data.max_prompt_length: %s; verl drops them (data.filter_overlong_prompts=true)", where)
    return measured


def data_files(data) -> list[tuple[str, str]]:
    """(key, path) of each configured train and validation file that exists now (``data`` is the config's section)."""
    found = []
    for key in ("train_files", "val_files"):
        files = data.get(key)
        found += [(key, path) for path in ([files] if isinstance(files, str) else list(files or [])) if os.path.isfile(path)]
    return found
