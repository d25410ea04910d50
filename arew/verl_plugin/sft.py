"""verl's own SFT trainer (``verl.trainer.sft_trainer``) on the CPU backend, for the lab's tiny chat models.

The lab fine-tunes its warm starts with its own loop (:func:`arew.lab.lm.warm_start.fine_tune`); this runs the trainer a
GPU user runs for the same job, so the two can be compared and a warm start made the way a cluster would make one.
:func:`run_sft` writes the conversations as verl's multi-turn parquet (a ``messages`` column), starts verl's trainer
under ``torchrun`` (one process, gloo) with ``VERL_PLATFORM=cpu`` and :data:`CPU_OVERRIDES`, and returns the trained
model's Hugging Face folder.

Beyond the CPU backend that ``import verl`` installs (:mod:`arew.verl_plugin.cpu`: the platform, the FSDP engines
registered for device "cpu"), verl 0.9.1's SFT trainer needs

- its process group started with plain gloo: ``verl/utils/distributed.py`` (``initialize_global_process_group``, which
  ``sft_trainer.run_sft`` imports when it runs) asks for ``"cpu:gloo,{device}:{nccl}"``, on this platform
  ``"cpu:gloo,cpu:gloo"``, which torch rejects. This module is ``torchrun``'s entry point: it replaces that function
  (source-checked) and calls verl's ``sft_trainer.main``, whose Hydra config and code are otherwise verl's own. The
  patch is here rather than in :mod:`arew.verl_plugin.cpu.verl_patches` because no other process calls that function;
- its Hugging Face export's ``config.json`` put back: ``verl/utils/checkpoint/fsdp_checkpoint_manager.py`` builds the
  model it saves with ``torch_dtype=torch.bfloat16``, so the folder says ``"dtype": "bfloat16"`` over float32 weights,
  and transformers then loads it in bf16; it also records the CPU run's ``attn_implementation``. SFT changes no
  architecture, so the input's config is the output's.

verl's loss mask differs from :func:`arew.lab.lm.warm_start.encode` by one token per assistant turn: verl trains on the
whole rendered assistant message after its generation prompt (``MultiTurnSFTDataset``), which includes the newline
after ``<|im_end|>``; the token ids are the same. The loss is the lab's otherwise: the mean over the batch's learned
tokens (a first step's loss equals transformers' on the same batch and mask).
"""

from __future__ import annotations

import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

# sha256 (first 16 hex digits) of the verl 0.9.1 source of each function the entry point replaces or relies on
FINGERPRINTS = {
    "verl.utils.distributed.initialize_global_process_group": "33a5452c4dde0059",
    # imports initialize_global_process_group from its module when it runs, so the replacement is the one it calls
    "verl.trainer.sft_trainer.run_sft": "5c028a6a2bc8c667",
}
ENTRY_POINT = "arew.verl_plugin.sft"  # torchrun runs this module (main below)
LOG = "sft.log"
METRICS = "metrics.jsonl"  # verl's file logger: one line per step, train/loss among its metrics

# What a CPU run needs beyond verl's sft_trainer_engine.yaml; the rest is verl's.
CPU_OVERRIDES = (
    # the CPU platform's device; verl's default (cuda) is where the trainer moves each batch's sequence lengths
    "trainer.device=cpu",
    # FSDP1 insists on an accelerator (sync_module_states); FSDP2 runs on gloo
    "engine.strategy=fsdp2",
    # full precision, as the lab's own SFT: without a mixed_precision section verl's FSDP engine computes in bf16
    # (param dtype and autocast) whatever engine.dtype says, and CPUs without AVX512-BF16 are slow in bf16
    "engine.model_dtype=fp32",
    "+engine.mixed_precision.param_dtype=fp32",
    "+engine.mixed_precision.reduce_dtype=fp32",
    "+engine.mixed_precision.buffer_dtype=fp32",
    # the model default, flash_attention_2, is CUDA only (transformers refuses it without flash-attn)
    "+model.override_config.attn_implementation=sdpa",
    # padded batches: verl's packed sequences run under SDPA with the same losses, but as one masked attention over
    # the whole batch's tokens (a 2-step run of the tiny model: 44 s instead of 16)
    "model.use_remove_padding=false",
    # speed only: a tiny model needs no activation memory saved, and recomputing the forward cost 4 s of a 16 s run
    "model.enable_gradient_checkpointing=false",
    # speed only: verl's default, 8 data-loader processes each epoch, cost 4 s of a 16 s run on 2 cores
    "data.num_workers=0",
    # the whole batch in one forward and backward, as the lab's own SFT; verl's default packs micro-batches by tokens
    "data.use_dynamic_bsz=false",
    # wandb, verl's default, needs credentials; the file logger's JSONL (VERL_FILE_LOGGER_PATH) is what run_sft reads
    "trainer.logger=[console,file]",
    # a fresh run each time: "auto" would resume from a checkpoint an earlier run left in the folder
    "trainer.resume_mode=disable",
    # the Hugging Face folder is all run_sft returns; FSDP shards and optimizer state are not kept
    "checkpoint.save_contents=[hf_model]",
)


def run_sft(
    model_dir: str | Path,
    conversations: list[list[dict[str, str]]],
    out_dir: str | Path,
    *,
    steps: int,
    batch_size: int = 8,
    learning_rate: float = 3e-3,
    warmup_steps: int = 0,
    seed: int = 0,
    max_length: int = 8192,
    timeout: float | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> Path:
    """Fine-tune the model in ``model_dir`` on ``conversations`` with verl's SFT trainer; returns the trained model's
    folder, tokenizer included. ``out_dir`` keeps what a failed or surprising run is read from: the parquet, the log
    (:data:`LOG`), verl's metrics (:data:`METRICS`), the command.

    The settings follow the lab's own SFT where verl lets them: one forward and backward per step of ``batch_size``
    conversations, AdamW, cosine decay to 0 after ``warmup_steps`` (verl's warm-up starts at lr 0, the lab's at
    lr / warmup, so the default is none). verl's sampler always seeds itself with 0, so ``seed`` orders the rows it
    samples from instead (seed 0 keeps them as given, which gives the lab's batches at its seed 0 through the first
    epoch); verl's engine reads it only under full determinism. A conversation longer than ``max_length`` tokens stops the run
    (verl's ``truncation: error``) rather than train on a cut transcript. ``overrides`` go to verl's Hydra config
    last. A failed run raises ``RuntimeError`` naming its log."""
    import pandas as pd

    if steps < 1:
        raise ValueError(f"steps: {steps} is not positive")
    if not 1 <= batch_size <= len(conversations):
        # verl's sampler drops the last incomplete batch: an epoch of no steps would never end the run
        raise ValueError(
            f"batch_size: {batch_size} must be between 1 and the number of conversations ({len(conversations)})"
        )
    model_dir, folder = Path(model_dir).resolve(), Path(out_dir).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    checkpoints = folder / "checkpoints"
    shutil.rmtree(checkpoints, ignore_errors=True)  # an earlier run's, which the returned folder must not be
    data = folder / "train.parquet"
    rows = list(conversations)
    if seed:
        random.Random(seed).shuffle(rows)
    pd.DataFrame({"messages": rows}).to_parquet(data, index=False)
    metrics, log_path = folder / METRICS, folder / LOG
    metrics.unlink(missing_ok=True)  # verl's file logger appends

    run_overrides = [
        f"model.path={model_dir}",
        f"data.train_files={data}",
        f"data.train_batch_size={batch_size}",
        f"data.micro_batch_size_per_gpu={batch_size}",
        f"data.max_length={max_length}",
        f"optim.lr={learning_rate}",
        "optim.lr_scheduler_type=cosine",
        f"optim.lr_warmup_steps={warmup_steps}",
        f"engine.seed={seed}",
        f"trainer.total_training_steps={steps}",
        # the run ends at the last step only if the epochs reach it (verl's default is 4 epochs)
        f"trainer.total_epochs={math.ceil(steps / (len(conversations) // batch_size))}",
        f"trainer.default_local_dir={checkpoints}",
        f"hydra.run.dir={folder / 'hydra'}",
        *CPU_OVERRIDES,
        *overrides,
    ]
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=1",
            "-m", ENTRY_POINT, *run_overrides]  # fmt: skip
    (folder / "command.txt").write_text(shlex.join(argv) + "\n")
    env = {**os.environ, "VERL_PLATFORM": "cpu", "HF_HUB_OFFLINE": "1", "VERL_FILE_LOGGER_PATH": str(metrics)}
    with open(log_path, "w") as log:
        # its own session: a timeout kills torchrun and the trainer process it started, not torchrun alone
        process = subprocess.Popen(argv, env=env, cwd=folder, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise RuntimeError(f"verl's SFT trainer did not finish in {timeout:.0f} s; its log: {log_path}") from None
    trained = checkpoints / f"global_step_{steps}" / "huggingface"
    if returncode != 0 or not (trained / "model.safetensors").is_file():
        raise RuntimeError(f"verl's SFT trainer failed (exit {returncode}{_last_error(log_path)}); its log: {log_path}")
    shutil.copyfile(model_dir / "config.json", trained / "config.json")  # see the module docstring
    return trained


def sft_losses(out_dir: str | Path) -> list[float]:
    """The training loss of every step of the run in ``out_dir``, from verl's file logger."""
    from arew.envs.rows import json_lines

    path = Path(out_dir) / METRICS
    entries = json_lines(path)[0] if path.exists() else []
    return [entry["data"]["train/loss"] for entry in entries if "train/loss" in entry.get("data", {})]


def _last_error(log_path: Path) -> str:
    """The trainer's exception, found above torchrun's own report of the failed process."""
    errors = [line for line in log_path.read_text(errors="replace").splitlines()
              if re.match(r"^[\w.]*(Error|Exception)\b", line) and "ChildFailedError" not in line]  # fmt: skip
    return f": {errors[-1].strip()}" if errors else ""


def _gloo_process_group(timeout_second: int = 36000) -> tuple[int, int, int]:
    """verl's ``initialize_global_process_group`` with the backend plain gloo (see the module docstring)."""
    from datetime import timedelta

    import torch.distributed

    torch.distributed.init_process_group(
        backend="gloo", timeout=timedelta(seconds=timeout_second), init_method=os.environ.get("DIST_INIT_METHOD")
    )
    return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def main() -> None:
    """``torchrun``'s entry point: verl's SFT trainer with its process group started on gloo."""
    import verl
    import verl.trainer.sft_trainer
    import verl.utils.distributed

    from arew.engines.source_guard import require_source

    for function in (verl.utils.distributed.initialize_global_process_group, verl.trainer.sft_trainer.run_sft):
        require_source(function, FINGERPRINTS, f"verl {verl.__version__}", "verl 0.9.1", "arew/verl_plugin/sft.py")
    verl.utils.distributed.initialize_global_process_group = _gloo_process_group
    verl.trainer.sft_trainer.main()


if __name__ == "__main__":
    main()
