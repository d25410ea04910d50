"""What a warm start's SFT learns, per kind of token: held-out next-token losses of the competent PE-G transcripts.

    python -m arew.lab.lm.token_losses [--steps 1200] [--every 150] [--learning-rate 3e-3] [--kv-heads 2] [--turns N] [--bf16] [--out DIR]

Fine-tunes the warm-start model (:mod:`arew.lab.lm.warm_start`, the competent player: ``inform = update = 1``)
and, every ``--every`` steps, measures the mean loss in nats on 24 held-out transcripts (``--held-out``), per category of the
assistant's tokens:

- ``rows``: the scheduled pair's two lines of the score table, copied into a question's scratch (the movie
  numbers read from the turn number, the scores copied from the table);
- ``signs``: the sign line (``Sign: 1=, 2+, ...``): each sign compares the two copied scores above it;
- ``question``: the question's payload (movies and the first ``+`` and ``-`` attribute);
- ``yesno``: the first word of an update's scratch, a copy of the user's answer just before it, from the
  second update on (every earlier turn's answer is a distractor of the same form); ``yesno_first`` the same
  word in the first update, the one with no earlier answer in the context;
- ``named``: the rest of that scratch (``2 up 3 down``), a copy of the question's attributes;
- ``estimate``: the update's numbers (the previous estimate, two of them moved by 0.1);
- ``other``: every other assistant token (tags, the locked forms).

A category at its base rate has not been learnt: ``rows`` near 0.45 nats (28% of its tokens are scores, each
at log 5 when not copied; the rest is the line's form), ``signs`` near 0.30 (29% of its tokens are signs, at
their entropy of 1.05 nats; the rest the attribute numbers and the form), ``yesno`` near log 2. The model then
writes the format without the lookup. Prints one JSON line per measurement and writes them to
``<out>/token_losses.jsonl``. docs/guides/lm-lab.md reports what it measured.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from dataclasses import replace
from pathlib import Path

from arew.lab.lm.warm_start import IGNORE, WarmStart, encode, fine_tune, transcripts, untrained_model

HELD_OUT_EPISODES = 24
HELD_OUT_SEED = 5  # the held-out transcripts' seed: rows apart from the training transcripts'
_SCRATCH = re.compile(r"<scratch>(.*?)</scratch>", re.DOTALL)
_INTERACT = re.compile(r"<interact>(.*?)</interact>")


def _spans(content: str, first_update: bool) -> list[tuple[int, int, str]]:
    """(start, end, category) of the character spans of one assistant message; ``first_update``: no update came before it."""
    scratch, interact = _SCRATCH.search(content), _INTERACT.search(content)
    spans = []
    if scratch and scratch.group(1).startswith("Movie ") and "\nSign:" in scratch.group(1):
        sign = scratch.start(1) + scratch.group(1).index("\nSign:")
        spans += [(scratch.start(1), sign, "rows"), (sign, scratch.end(1), "signs")]
        if interact:
            spans.append((interact.start(1), interact.end(1), "question"))
    elif scratch and scratch.group(1).split(":")[0] in ("yes", "no"):
        word_end = scratch.start(1) + len(scratch.group(1).split(":")[0])
        spans += [(scratch.start(1), word_end, "yesno_first" if first_update else "yesno"), (word_end, scratch.end(1), "named")]
        if interact:
            spans.append((interact.start(1), interact.end(1), "estimate"))
    return spans


def token_categories(tokenizer, messages: list[dict[str, str]]) -> list[str | None]:
    """The category of each token :func:`arew.lab.lm.warm_start.encode` gives (None: not the assistant's)."""
    categories: list[str | None] = []
    updates = 0  # assistant messages seen that answer a question round (every other one)
    for message in messages:
        head = tokenizer(f"<|im_start|>{message['role']}\n", add_special_tokens=False).input_ids
        body = tokenizer(f"{message['content']}<|im_end|>", add_special_tokens=False, return_offsets_mapping=True)
        tail = tokenizer("\n", add_special_tokens=False).input_ids
        categories += [None] * len(head)
        spans = []
        if message["role"] == "assistant":
            spans = _spans(message["content"], first_update=updates == 0)
            updates += any(name.startswith("yesno") for _, _, name in spans)
        for start, end in body.offset_mapping:
            if message["role"] != "assistant":
                categories.append(None)
                continue
            categories.append(next((name for low, high, name in spans if start < high and end > low), "other"))
        categories += [None] * len(tail)
    return categories


def first_turns(messages: list[dict[str, str]], turns: int) -> list[dict[str, str]]:
    """The conversation up to the assistant's ``2 * turns``-th message (a question and an update a turn)."""
    kept, written = [], 0
    for message in messages:
        kept.append(message)
        written += message["role"] == "assistant"
        if written == 2 * turns:
            break
    return kept


def held_out_losses(model, examples: list[tuple[list[int], list[int], list[str | None]]]) -> dict[str, float]:
    """Mean next-token loss (nats) per category over ``examples`` (token ids, labels, categories)."""
    import torch

    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for ids, labels, categories in examples:
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
            targets = torch.tensor(labels[1:])
            losses = torch.nn.functional.cross_entropy(logits, targets.clamp(min=0), reduction="none")
            learnt = targets != IGNORE
            for position in torch.nonzero(learnt).flatten().tolist():
                name = categories[position + 1]
                if name is not None:
                    sums[name] = sums.get(name, 0.0) + float(losses[position])
                    counts[name] = counts.get(name, 0) + 1
    model.train(was_training)
    return {name: round(sums[name] / counts[name], 3) for name in sorted(sums)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1200, help="SFT steps (the cosine schedule spans them)")
    parser.add_argument("--every", type=int, default=150, help="measure every this many steps (and after the first)")
    parser.add_argument("--learning-rate", type=float, default=WarmStart.learning_rate)
    parser.add_argument("--kv-heads", type=int, default=WarmStart.kv_heads, help="1: grouped-query attention; 2: every head its own")
    parser.add_argument("--bf16", action="store_true", help="SFT under bf16 autocast")
    parser.add_argument("--episodes", type=int, default=WarmStart.episodes, help="training transcripts")
    parser.add_argument("--turns", type=int, default=None,
                        help="each transcript, the held-out ones too, up to its first N turns' question and update only "
                             "(shorter, cheaper steps: a curriculum's first stage)")  # fmt: skip
    parser.add_argument("--held-out", type=int, default=HELD_OUT_EPISODES, help="held-out transcripts the losses are measured on")
    parser.add_argument("--out", default="runs/lm-lab/token-losses", help="folder for the tokenizer and token_losses.jsonl")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.every < 1 or args.held_out < 1 or (args.turns is not None and args.turns < 1):
        parser.error("--steps, --every, --held-out and --turns: at least 1")
    config = WarmStart(inform=1.0, update=1.0, sft_steps=args.steps, learning_rate=args.learning_rate, kv_heads=args.kv_heads,
                       bf16=args.bf16, episodes=args.episodes)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    conversations, _ = transcripts(config)
    held_out, _ = transcripts(replace(config, episodes=args.held_out, seed=HELD_OUT_SEED))
    if args.turns is not None:
        conversations, held_out = ([first_turns(messages, args.turns) for messages in group] for group in (conversations, held_out))
    model, tokenizer = untrained_model(config, conversations, out)
    examples = [(*encode(tokenizer, messages), token_categories(tokenizer, messages)) for messages in held_out]
    measured: list[dict] = []
    started = time.perf_counter()
    sink = open(out / "token_losses.jsonl", "w")

    def measure(step: int, net) -> None:
        if step == 1 or step % args.every == 0 or step == args.steps:
            row = {"step": step, "seconds": round(time.perf_counter() - started), **held_out_losses(net, examples)}
            measured.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            sink.write(line + "\n")
            sink.flush()

    with sink:
        fine_tune(model, tokenizer, conversations, config, on_step=measure)
    return measured


if __name__ == "__main__":
    main()
