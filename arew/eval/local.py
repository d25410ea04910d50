"""A local Hugging Face model folder (or a verl checkpoint's) as a :class:`~arew.eval.model.ChatModel`.

Generation goes through :mod:`arew.engines.hf_generation`, as the CPU rollout engine's does.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import torch

from arew.engines.hf_generation import generate_batch, generation_config
from arew.eval.model import Completion, GenerationError, GenerationParams

WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")
FSDP_SHARDS = "model_world_size_*_rank_*.pt"
GENERATION_LOCK = threading.Lock()  # torch's random state is the process's: one seeded generation at a time


def resolve_model_folder(path: str | Path) -> Path:
    """The Hugging Face folder behind ``path``: the folder itself, or inside a verl checkpoint
    (a run's checkpoint dir, meaning its latest step; a ``global_step_N`` dir; or its ``actor`` dir),
    ``actor/huggingface``, which holds the weights when the run saved ``hf_model``."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise FileNotFoundError(f"model {given}: no such folder")
    folder = given
    tracker = folder / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        step = tracker.read_text(encoding="utf-8", errors="replace").strip()
        if not step.isascii() or not step.isdigit():
            raise FileNotFoundError(f"model {given}: {tracker.name} holds {step[:40]!r}, not a step number (torn by an interrupted save?)")
        folder = folder / f"global_step_{int(step)}"
        if not folder.is_dir():
            raise FileNotFoundError(f"model {given}: {tracker.name} names {folder.name}, which is missing")
    for inner in ("actor", "huggingface"):
        if not _has_weights(folder) and (folder / inner).is_dir():
            folder = folder / inner
    if _has_weights(folder):
        return folder
    actor = folder.parent if folder.name == "huggingface" else folder
    if any(actor.glob(FSDP_SHARDS)):
        raise FileNotFoundError(
            f"model {given}: the checkpoint {actor} holds FSDP shards only, no Hugging Face weights. Train with "
            "actor_rollout_ref.actor.checkpoint.save_contents=['model','optimizer','extra','hf_model'], or merge "
            f"this one: python -m verl.model_merger merge --backend fsdp --local_dir {actor} --target_dir {actor / 'huggingface'}"
        )
    steps = sorted(child.name for child in folder.glob("global_step_*"))
    hint = f"; no {tracker.name}, so pass one of {', '.join(steps)}" if steps else ""
    raise FileNotFoundError(
        f"model {given}: no weights ({', '.join(WEIGHT_FILES)}) in a Hugging Face folder or a verl checkpoint{hint}"
    )


def _has_weights(folder: Path) -> bool:
    return any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES)


def pick_device(device: str) -> torch.device:
    """``auto``: the GPU when there is one, else the CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


class LocalModel:
    """A causal LM loaded from a folder; concurrent calls take turns (:data:`GENERATION_LOCK`,
    across all models of the process), so that a call's seed governs its own sampling only.

    Float32 on the CPU (bfloat16 matmuls are slow there), bfloat16 on a GPU. Stop strings end
    the turn and stay in the text, as verl's engines return them."""

    def __init__(self, path: str | Path, *, device: str = "auto", name: str | None = None, trust_remote_code: bool = False):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = resolve_model_folder(path)
        self.name = name or str(path)
        self.device = pick_device(device)
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, trust_remote_code=trust_remote_code)
        self.model.to(self.device).eval()
        self.context_length: int | None = getattr(self.model.config, "max_position_embeddings", None)
        eos = self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id
        self._eos_ids = set(eos if isinstance(eos, list) else [eos])

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        return await asyncio.to_thread(self._complete, messages, params)

    def _complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion:
        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        max_new_tokens = params.max_tokens
        if self.context_length is not None:
            room = self.context_length - len(prompt)
            if room < 1:
                raise GenerationError(f"{self.name}: a prompt of {len(prompt)} tokens fills its context of {self.context_length}")
            max_new_tokens = min(max_new_tokens, room)
        config = generation_config(
            self.model, self.tokenizer, max_new_tokens=max_new_tokens,
            temperature=params.temperature, top_p=params.top_p, stop=params.stop,
        )  # fmt: skip
        try:
            with GENERATION_LOCK:
                [new_tokens], _ = generate_batch(self.model, self.tokenizer, [prompt], config, params.seed)
        except RuntimeError as error:  # e.g. out of GPU memory
            raise GenerationError(f"{self.name}: generation failed: {error}") from error
        tokens = new_tokens.tolist()
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        ends = [text.find(stop) + len(stop) for stop in params.stop if stop in text]
        if ends:
            text = text[: min(ends)]  # the stop string may end inside the last token
        ended = bool(ends) or (bool(tokens) and tokens[-1] in self._eos_ids)
        return Completion(
            text=text,
            finish_reason="stop" if ended or len(tokens) < max_new_tokens else "length",
            prompt_tokens=len(prompt),
            completion_tokens=len(tokens),
        )
