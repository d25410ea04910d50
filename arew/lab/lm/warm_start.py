"""The warm-start policy of the language-model lab: a small Qwen2 fine-tuned on scripted transcripts.

A task's scripted player (its registry ``demonstrations``: question informativeness ``inform`` and
belief-update quality ``update`` are probabilities) plays episodes through the episode driver, so every
transcript is the environment's own prompts and feedback, rendered with the chat template the trainer
uses. A byte-level BPE tokenizer is trained on those transcripts, a Qwen2 with random weights is built
over it (:func:`arew.engines.tiny_models.build_tiny_model`, head size 64, which vLLM's CPU attention
supports) and trained by supervised fine-tuning on the assistant turns only.

A warm start can instead start from another one, its ``base``: the lab's *locked* policy is the *competent*
build fine-tuned further on locked transcripts, as an instruct model that could do the task has settled into
habits that do not (the paper's premise): the skill is in the weights, the policy rarely uses it. The base's
tokenizer and architecture carry over.

Two SFT trainers with the same schedule, and at seed 0 the same batches (``sft_trainer``): ``lab``, this module's
own loop (a few hundred steps of next-token loss in one process, with the tokenizer loaded from the model folder
exactly as verl loads it; what the token-loss probe hooks into), and ``verl``, verl's own SFT trainer on the CPU
backend (:mod:`arew.verl_plugin.sft`: ``torchrun``, an FSDP2 process group on gloo), about a quarter slower a step
and 16 s to start. Their first steps' losses agree within 0.1% (docs/guides/lm-lab.md).

Every build is cached under ``<cache>/<name>-<hash>``: the hash covers the :class:`WarmStart` settings, the
source of this module, of the player and of the task's prompts, and the torch and transformers versions,
so a change to anything that made the model builds a new one.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SFT_TRAINERS = ("lab", "verl")
ARCHITECTURE = ("task", "vocab_size", "hidden_size", "layers", "heads", "kv_heads")  # what a fine-tune takes from its base
IGNORE = -100  # the label of a token the loss skips (transformers' convention)
TRANSCRIPT_SEED = 7919  # the demonstration rows' seed: instances apart from the RL data's (arew prepare's seed 0)


@dataclass(frozen=True)
class WarmStart:
    """Everything that makes a warm-start model."""

    task: str = "pe-g-s2"
    inform: float = 0.2  # probability that a scripted question is informative
    update: float = 0.2  # probability that a scripted belief update is a real one
    episodes: int = 512  # SFT transcripts
    vocab_size: int = 1000
    hidden_size: int = 128
    layers: int = 4
    heads: int = 2
    # key-value heads: ``heads`` is plain attention. With a pair per head one probe run of three learnt to copy the
    # user's answer word by step 150; with one pair shared by the heads (grouped-query attention) none did in 200
    # fp32 or 450 bf16 steps (docs/guides/lm-lab.md)
    kv_heads: int = 2
    sft_steps: int = 300
    batch_size: int = 8
    learning_rate: float = 3e-3
    sft_trainer: str = "lab"  # "lab": this module's loop; "verl": verl's own SFT trainer (see the module docstring)
    bf16: bool = False  # SFT under bf16 autocast (about 1.5x faster on CPUs with AVX512-BF16; 2.4x slower without it)
    seed: int = 0
    base: WarmStart | None = None  # fine-tune this build instead of a random-weight model (its tokenizer and architecture)

    def __post_init__(self) -> None:
        checks = {
            "inform": 0 <= self.inform <= 1,
            "update": 0 <= self.update <= 1,
            "episodes": self.episodes >= 1,
            "vocab_size": self.vocab_size >= 300,
            "hidden_size": self.hidden_size >= 1 and self.heads >= 1 and self.hidden_size % self.heads == 0,
            "kv_heads": self.kv_heads >= 1 and self.heads % self.kv_heads == 0,
            "layers": self.layers >= 1,
            "sft_steps": self.sft_steps >= 1,
            "batch_size": self.batch_size >= 1,
            "learning_rate": self.learning_rate > 0,
            "sft_trainer": self.sft_trainer in SFT_TRAINERS,
            "bf16": not (self.bf16 and self.sft_trainer == "verl"),  # verl's CPU run is fp32 (arew.verl_plugin.sft)
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"warm start {key}: invalid value {getattr(self, key)!r}")
        for key in ARCHITECTURE if self.base is not None else ():
            if getattr(self, key) != getattr(self.base, key):
                raise ValueError(f"warm start {key}: {getattr(self, key)!r} differs from its base's {getattr(self.base, key)!r} (a fine-tune keeps the base's)")

    @property
    def name(self) -> str:
        own = f"inform{self.inform:g}-update{self.update:g}"
        return f"{self.task}-{own}" if self.base is None else f"{self.base.name}-then-{own}"

    def key(self) -> str:
        """The hash of everything that made the model (see the module docstring)."""
        import torch
        import transformers

        from arew.envs.registry import env_class, task_spec

        player = task_spec(self.task).demonstrations.split(":")[0]
        sources = [sys.modules[__name__], sys.modules.get(player) or __import__(player, fromlist=["_"]),
                   inspect.getmodule(env_class(self.task).prompts) or env_class(self.task).prompts]  # fmt: skip
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode())
        for module in sources:
            digest.update(inspect.getsource(module).encode())
        digest.update(f"torch {torch.__version__} transformers {transformers.__version__}".encode())
        return digest.hexdigest()[:12]


def transcripts(config: WarmStart) -> tuple[list[list[dict[str, str]]], dict[str, float]]:
    """The scripted players' conversations (system, user and assistant messages) and their mean reward and critiques."""
    from arew.audit.runner import play_scripted
    from arew.envs.registry import demonstration_player, generate_rows

    rows = generate_rows(config.task, {"train": config.episodes}, TRANSCRIPT_SEED + config.seed)["train"]

    async def play_all() -> list[Any]:
        return [
            await play_scripted(config.task, demonstration_player(config.task, config.inform, config.update, config.seed * 100_003 + i), info)
            for i, info in enumerate(rows)
        ]

    conversations, rewards, labels = [], [], {"as": [], "bt": []}
    for env, log in asyncio.run(play_all()):
        messages = list(env.initial_messages())
        for text, reply in zip(log.texts, log.replies):
            messages.append({"role": "assistant", "content": text})
            if reply is not None:
                messages.append({"role": "user", "content": reply})
        conversations.append(messages)
        rewards.append(float(env.reward()))
        for channel, label in zip(log.channels, log.labels):
            labels[channel].append(label)
    summary = {"reward": sum(rewards) / len(rewards)}
    summary.update({f"{channel}_critique": sum(v) / len(v) for channel, v in labels.items() if v})
    return conversations, summary


def encode(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """Token ids of a conversation as the chat template renders it, and labels that keep only the assistant's
    turns (its text and end-of-turn token); checked against the template so that training sees what RL generates."""
    ids: list[int] = []
    labels: list[int] = []
    for message in messages:
        head = tokenizer(f"<|im_start|>{message['role']}\n", add_special_tokens=False).input_ids
        body = tokenizer(f"{message['content']}<|im_end|>", add_special_tokens=False).input_ids
        tail = tokenizer("\n", add_special_tokens=False).input_ids
        ids += head + body + tail
        learn = message["role"] == "assistant"
        labels += [IGNORE] * len(head) + (body if learn else [IGNORE] * len(body)) + [IGNORE] * len(tail)
    rendered = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    if list(rendered) != ids:
        raise ValueError("the tokenizer does not split the chat template at its special tokens: SFT and RL would see different tokens")
    return ids, labels


def warmup_steps(config: WarmStart) -> int:
    """The learning rate's linear warm-up before its cosine decay."""
    return max(1, config.sft_steps // 20)


def fine_tune(model, tokenizer, conversations: list[list[dict[str, str]]], config: WarmStart, on_step=None) -> list[float]:
    """Next-token SFT on the assistant turns; returns the loss of every step. ``on_step(step, model)`` is called
    after each (1-based) step, for probes that follow the training (:mod:`arew.lab.lm.token_losses`)."""
    import torch

    torch.manual_seed(config.seed)
    encoded = [encode(tokenizer, messages) for messages in conversations]
    order = torch.randperm(len(encoded), generator=torch.Generator().manual_seed(config.seed)).tolist()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
    warmup = warmup_steps(config)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, config.sft_steps) / config.sft_steps))
    )
    model.train()
    losses = []
    for step in range(config.sft_steps):
        batch = [encoded[order[(step * config.batch_size + k) % len(order)]] for k in range(config.batch_size)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([lab + [IGNORE] * (width - len(lab)) for _, lab in batch])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(ids) for ids, _ in batch])[:, None]).long()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step + 1, model)
    model.eval()
    return losses


def verl_fine_tune(model, folder: Path, conversations: list[list[dict[str, str]]], config: WarmStart):
    """:func:`fine_tune`'s job done by verl's SFT trainer on the model as it stands (saved into ``folder`` beside its
    tokenizer); returns the losses of every step and the trained model. verl's log, metrics and command stay in
    ``folder/verl-sft``; its checkpoint, once loaded, does not."""
    from transformers import AutoModelForCausalLM

    from arew.verl_plugin.sft import run_sft, sft_losses

    model.save_pretrained(folder)
    run = folder / "verl-sft"
    trained = run_sft(folder, conversations, run, steps=config.sft_steps, batch_size=config.batch_size,
                      learning_rate=config.learning_rate, warmup_steps=warmup_steps(config), seed=config.seed)  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(trained)
    shutil.rmtree(run / "checkpoints")
    return sft_losses(run), model


RECORD = "warm_start.json"


def untrained_model(config: WarmStart, conversations: list[list[dict[str, str]]], folder: Path):
    """The random-weight model and the tokenizer trained on ``conversations``, both saved in ``folder`` (its config and
    tokenizer files), the tokenizer loaded back from there exactly as verl and ``arew eval`` load it."""
    from transformers import AutoTokenizer

    from arew.engines.tiny_models import build_chat_tokenizer, build_tiny_model

    # the role names as whole words; no special token's text in the corpus: the trainer would learn merges through it
    # that the saved tokenizer does not reproduce
    roles = ["system\n", "user\n", "assistant\n"]
    texts = roles * 50 + [message["content"] for messages in conversations[:64] for message in messages]
    tokenizer = build_chat_tokenizer(texts, vocab_size=config.vocab_size)
    model = build_tiny_model(tokenizer, config.seed, hidden_size=config.hidden_size, layers=config.layers, heads=config.heads,
                             kv_heads=config.kv_heads)  # fmt: skip
    tokenizer.save_pretrained(folder)
    model.config.save_pretrained(folder)
    # next to the model's config, the model type picks the tokenizer's class (Qwen2's, whose pre-tokenizer splits text
    # unlike the trainer's object): SFT must see what RL will
    return model, AutoTokenizer.from_pretrained(folder)


def base_model(base: Path, folder: Path):
    """The model of the built warm start in ``base`` and its tokenizer, the tokenizer saved in ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.save_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(base), tokenizer


def build(config: WarmStart, cache: str | Path, log=print) -> Path:
    """The warm-start model's Hugging Face folder, built unless the cache has it (its base first, likewise); its
    ``warm_start.json`` records the settings, the hash, the scripted players' scores, the SFT losses and the build's
    seconds (not counting the base's)."""
    from transformers import AutoTokenizer

    folder = Path(cache) / f"{config.name}-{config.key()}"
    if (folder / RECORD).is_file():
        return folder
    base = build(config.base, cache, log) if config.base is not None else None
    started = time.perf_counter()
    conversations, scripted = transcripts(config)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # an interrupted build's
    partial.mkdir(parents=True)
    model, tokenizer = untrained_model(config, conversations, partial) if base is None else base_model(base, partial)
    log(f"warm start {config.name}: {len(conversations)} transcripts (scripted reward {scripted['reward']:.2f}), "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {config.sft_steps} SFT steps"
        + (f" from {base.name}" if base is not None else ""))  # fmt: skip
    if config.sft_trainer == "verl":
        losses, model = verl_fine_tune(model, partial, conversations, config)
    else:
        losses = fine_tune(model, tokenizer, conversations, config)
    model.save_pretrained(partial)
    record = {"settings": asdict(config), "key": config.key(), "scripted": scripted, "sft_loss_first": losses[0],
              "sft_loss_last": sum(losses[-10:]) / len(losses[-10:]), "seconds": time.perf_counter() - started,
              "parameters": sum(p.numel() for p in model.parameters())}  # fmt: skip
    if encode(AutoTokenizer.from_pretrained(partial), conversations[0]) != encode(tokenizer, conversations[0]):
        raise RuntimeError(f"the tokenizer saved in {partial} encodes a transcript differently from the one the model was trained with")
    (partial / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)  # a build that stopped before its record
    partial.rename(folder)
    log(f"warm start {config.name}: SFT loss {record['sft_loss_first']:.3f} -> {record['sft_loss_last']:.3f} in {record['seconds']:.0f} s")
    return folder
