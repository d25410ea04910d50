"""The GPU check: what of AReW runs on PyTorch alone, timed on CUDA tensors against the CPU, in a few minutes.

    python benchmarks/gpu_check.py [--batch 512] [--length 8192] [--repeats 5] [--device auto] [--out DIR] [--publish]

Needs PyTorch and this package only: no verl, vLLM or Ray, no network, nothing installed. On a multi-turn batch
at the paper's scale (512 trajectories x 8192 tokens, 10-20 decisions each; :mod:`batches`) it times, on the
CPU and on the device (``--device``, default ``cuda`` when one is present, else the CPU twice):

- a pure-torch GRPO baseline (each prompt's 4 rollouts normalised, broadcast on the model tokens), all on the device;
- AReW's advantage stage over it (:func:`arew.core.reweight`: records to segments, coefficients, the term added on
  the model tokens) with the default ``algorithm.arew`` settings;
- the credit baselines of :mod:`arew.core.credit`: GiGPO, turn-level GAE and turn-level GRPO;
- where transformers is installed, a training step (forward, backward, AdamW) of the small Qwen2 the tests build
  and a batched generation with the ``hf`` engine's sampler (:mod:`arew.engines.hf_generation`).

Each result computed on the device is compared with the CPU's (the largest absolute difference is in the table:
the same numbers, to float32 rounding). The table (``gpu_check.md``) and its figures (``gpu_check.json``) go to
``--out``; what was skipped, and why, is listed under it. ``--publish`` puts the table into
docs/reference/benchmarks.md, from a CUDA run only: absolute GPU times hold only from a GPU. tests/benchmarks
runs it on the CPU at a small size so that it cannot rot.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from batches import ROLLOUTS_PER_PROMPT, decision_keys, multi_turn_batch

from arew.core import (
    collect_segments,
    gigpo_advantages,
    parse_config,
    reweight,
    turn_gae_advantages,
    turn_grpo_advantages,
)
from arew.reporting.markdown_blocks import replace_block

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "benchmarks.md"
MARKER = "bench:gpu-check"


def grpo_advantages(rewards: torch.Tensor, mask: torch.Tensor, group: int = ROLLOUTS_PER_PROMPT) -> torch.Tensor:
    """Outcome GRPO in torch: each trajectory's score normalised within its prompt's ``group`` rollouts, on every model token."""
    scores = rewards.sum(-1).view(-1, group)
    normalised = (scores - scores.mean(-1, keepdim=True)) / (scores.std(-1, keepdim=True) + 1e-6)
    return normalised.reshape(-1, 1) * mask


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], torch.Tensor], device: torch.device, repeats: int) -> tuple[float, torch.Tensor]:
    """(median seconds of ``repeats`` calls after one warm-up, the last result on the CPU)."""
    result = fn()
    seconds = []
    for _ in range(repeats):
        _synchronise(device)
        started = time.perf_counter()
        result = fn()
        _synchronise(device)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result.detach().float().cpu()


def advantage_checks(batch: int, length: int) -> dict[str, Callable[[torch.device], torch.Tensor]]:
    """Each computation of the advantage stage, as a function of the device its tensors live on."""
    made = multi_turn_batch(batch, length, seed=0)
    config = parse_config({})
    segments = collect_segments(made.records, torch.full((batch,), length))
    keys = decision_keys(made.records)
    outcome = made.token_level_rewards.sum(-1)
    on = {}

    def tensors(device: torch.device) -> tuple[torch.Tensor, ...]:
        if device not in on:
            on[device] = tuple(t.to(device) for t in (made.response_mask, made.token_level_rewards, made.values, outcome))
        return on[device]

    def grpo(device):
        mask, rewards, _, _ = tensors(device)
        return grpo_advantages(rewards, mask)

    def arew_grpo(device):
        mask, rewards, _, _ = tensors(device)
        return reweight(grpo_advantages(rewards, mask), mask, segments, config, step=1).tensor

    def gigpo(device):
        mask, _, _, scores = tensors(device)
        return gigpo_advantages(segments, scores, mask, made.groups, keys, config).advantages

    def turn_gae(device):
        mask, rewards, values, _ = tensors(device)
        return turn_gae_advantages(segments, rewards, mask, values, config).advantages

    def turn_grpo(device):
        mask, _, _, scores = tensors(device)
        return turn_grpo_advantages(segments, scores, mask, made.groups, config).advantages

    return {"grpo (pure torch)": grpo, "arew over grpo": arew_grpo, "gigpo": gigpo, "turn-level gae": turn_gae, "turn-level grpo": turn_grpo}


def model_checks(skipped: list[str]) -> dict[str, Callable[[torch.device], torch.Tensor]]:
    """A training step and a generation of the tests' small Qwen2, where transformers is at hand."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        skipped.append("the small model's training step and hf generation: transformers is not installed")
        return {}
    from arew.engines.hf_generation import generate_batch, generation_config
    from arew.engines.tiny_models import build_chat_tokenizer, build_tiny_model

    tokenizer = build_chat_tokenizer()
    start = build_tiny_model(tokenizer, 0, hidden_size=128, layers=4, heads=2)  # the lm-lab warm start's shape
    start_weights = {key: value.clone() for key, value in start.state_dict().items()}
    built = {}

    def model(device: torch.device):
        if device not in built:
            built[device] = build_tiny_model(tokenizer, 0, hidden_size=128, layers=4, heads=2).to(device)
        return built[device]

    tokens = torch.randint(3, len(tokenizer), (8, 256), generator=torch.Generator().manual_seed(0))

    def train_step(device):
        net = model(device)
        net.load_state_dict(start_weights)  # every step from the same weights, so the devices' losses compare
        net.train()
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
        ids = tokens.to(device)
        loss = net(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        return loss.detach().reshape(1)

    def generation(device):
        net = model(device).eval()
        config = generation_config(net, tokenizer, max_new_tokens=32, temperature=0.0)
        new, _ = generate_batch(net, tokenizer, [row[:64].tolist() for row in tokens], config, seed=0)
        return torch.tensor([len(row) for row in new], dtype=torch.float32)

    return {"small model: training step (loss)": train_step, "small model: hf generation (new tokens per row)": generation}


def run(batch: int, length: int, repeats: int, device: torch.device) -> dict:
    skipped: list[str] = []
    if device.type == "cpu":
        skipped.append("no CUDA device: the device column is the CPU again (the format, not GPU times)")
    checks = {**advantage_checks(batch, length), **model_checks(skipped)}
    cpu = torch.device("cpu")
    rows = {}
    for name, fn in checks.items():
        cpu_seconds, on_cpu = timed(lambda fn=fn: fn(cpu), cpu, repeats)
        device_seconds, on_device = timed(lambda fn=fn: fn(device), device, repeats)
        rows[name] = {"cpu_ms": 1e3 * cpu_seconds, "device_ms": 1e3 * device_seconds, "speed_up": cpu_seconds / device_seconds,
                      "max_abs_difference": float((on_cpu - on_device).abs().max()) if on_cpu.numel() else 0.0}  # fmt: skip
    baseline = rows["grpo (pure torch)"]["device_ms"]
    for row in rows.values():
        row["x_grpo_on_device"] = row["device_ms"] / baseline if baseline else float("nan")
    return {"batch": batch, "length": length, "repeats": repeats, "device": _name(device), "torch": torch.__version__,
            "machine": f"{platform.machine()}, {platform.python_version()}", "rows": rows, "skipped": skipped}  # fmt: skip


def _name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def markdown(figures: dict) -> str:
    lines = [f"_{figures['batch']} trajectories x {figures['length']} tokens, median of {figures['repeats']}; device {figures['device']}, "
             f"torch {figures['torch']}, {figures['machine']}; written by `python benchmarks/gpu_check.py`_", "",
             "| computation | CPU ms | device ms | CPU / device | device, x pure-torch GRPO | max abs difference |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in figures["rows"].items():
        lines.append(f"| {name} | {row['cpu_ms']:.2f} | {row['device_ms']:.2f} | {row['speed_up']:.2f} | {row['x_grpo_on_device']:.1f} "
                     f"| {row['max_abs_difference']:.2e} |")  # fmt: skip
    lines += [""] + [f"Skipped: {why}." for why in figures["skipped"]]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512, help="trajectories (a multiple of 4: the rollouts of a prompt)")
    parser.add_argument("--length", type=int, default=8192, help="response tokens per trajectory")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cuda, cuda:N or cpu")
    parser.add_argument("--out", default="runs/gpu-check", help="folder for gpu_check.md and gpu_check.json")
    parser.add_argument("--publish", action="store_true", help="put the table into docs/reference/benchmarks.md (CUDA runs only)")
    args = parser.parse_args(argv)
    if args.batch < ROLLOUTS_PER_PROMPT or args.batch % ROLLOUTS_PER_PROMPT or args.length < 64 or args.repeats < 1:
        parser.error(f"--batch: a positive multiple of {ROLLOUTS_PER_PROMPT}; --length: at least 64; --repeats: at least 1")
    name = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    device = torch.device(name)
    if args.publish and device.type != "cuda":
        parser.error("--publish needs a CUDA device: absolute GPU times hold only from a GPU")
    started = time.perf_counter()
    figures = run(args.batch, args.length, args.repeats, device)
    figures["seconds"] = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(figures)
    (out / "gpu_check.md").write_text(text)
    (out / "gpu_check.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(text, end="")
    print(f"{figures['seconds']:.0f} s; {out / 'gpu_check.md'}", file=sys.stderr)
    if args.publish:
        PAGE.write_text(replace_block(PAGE.read_text(), MARKER, text))
    return figures


if __name__ == "__main__":
    main()
