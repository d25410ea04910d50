"""``arew smoke``: verl's real ``main_ppo`` for a few steps on a tiny local model, on the CPU backend.

It runs the recipe a GPU user runs (``arew/configs/recipe.yaml`` with the task, algorithm and
variant groups) plus ``+backend=cpu`` and :data:`SMOKE_OVERRIDES`, in a subprocess with
``VERL_PLATFORM=cpu``, then reads verl's ``file`` logger and prints a summary. It exits non-zero
when the run fails or logs fewer training steps than asked for.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from arew.configs import CONFIG_DIR, CONFIG_PATH, CPU_ROLLOUT_BACKENDS, group_options, task_config_dirs
from arew.envs.rows import json_lines

# tau2's prompt (policy and tools, 27k characters) is 21k tokens in the tiny tokenizer's 600-word
# vocabulary; trained on that prompt with 2000 words it is 6.9k, about what Qwen's tokenizer gives
PROMPT_TRAINED_TOKENIZER = {"tau2-solo": 2000, "tau2-dual": 2000}
ALGOS = group_options("algo")  # the recipes' algorithms
# vLLM CPU sizes its KV cache from this (GiB); its own default (4) is more than a tiny run needs
VLLM_CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
VARIANTS = group_options("variant")

# Sizes that fit a 2-core machine in minutes; everything else is the recipe's.
SMOKE_OVERRIDES = (
    "data.train_batch_size=4",
    "data.val_max_samples=4",
    "data.max_response_length=512",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
    "critic.ppo_micro_batch_size_per_gpu=1",
    "arew_agent.max_tokens_per_turn=16",
    "arew_agent.feedback_reserve_tokens=128",
    "trainer.logger=[console,file]",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    # a random model scores 0: false positives give critiques of both signs, so AReW has something to reweight
    "algorithm.arew.noise.neg_to_pos_prob=0.5",
)
# --cluster (e.g. as a Ray job's command): join the running cluster (RAY_ADDRESS) instead of starting
# one; Ray refuses num_cpus/num_gpus from a driver that joins, and the cluster's workers get their
# environment from the runtime env, not from this process (which then also takes the job's).
CLUSTER_OVERRIDES = ("ray_kwargs.ray_init.num_cpus=null", "ray_kwargs.ray_init.num_gpus=null")
CLUSTER_ENV = ("VERL_PLATFORM", "HF_HUB_OFFLINE", "AREW_DATA_DIR", "VERL_FILE_LOGGER_PATH")
TIMING_KEYS = {
    "generation": "timing_s/gen",
    "old log-prob": "timing_s/old_log_prob",
    "ref": "timing_s/ref",
    "values": "timing_s/values",
    "advantage": "timing_s/adv",
    "critic update": "timing_s/update_critic",
    "actor update": "timing_s/update_actor",
    "weight sync": "timing_s/update_weights",
    "step": "timing_s/step",
}


@dataclass
class SmokeRun:
    """One finished run: its folder, exit status, and the training steps verl's file logger wrote."""

    folder: Path
    returncode: int
    steps: list[dict[str, float]] = field(default_factory=list)
    validation: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0

    @property
    def start_up_seconds(self) -> float:
        """Wall time outside the training steps: Ray and verl's processes starting, validation, shutdown."""
        return self.wall_seconds - sum(step.get("timing_s/step", 0.0) for step in self.steps)

    @property
    def metrics_path(self) -> Path:
        return self.folder / "metrics.jsonl"

    @property
    def log_path(self) -> Path:
        return self.folder / "main_ppo.log"

    def history(self) -> list[dict[str, float]]:
        """Every training step the folder's runs logged, one entry per step: a resumed run's own entry for the
        steps it ran again, the earlier attempts' (:func:`keep_earlier_metrics`) for the steps before it."""
        by_step: dict[int, dict[str, float]] = {}
        for path in [*earlier_metrics(self.folder), self.metrics_path]:
            for data in read_metrics(path)[0]:
                by_step[int(data["training/global_step"])] = data
        return [by_step[step] for step in sorted(by_step)]


ATTEMPT = "metrics.attempt{:03d}.jsonl"


def earlier_metrics(folder: Path) -> list[Path]:
    """The metrics files of the folder's earlier runs, oldest first."""
    return sorted(folder.glob("metrics.attempt*.jsonl"))


def keep_earlier_metrics(folder: Path) -> Path | None:
    """Before a run in ``folder``: keep the last run's metrics under the next attempt's name (verl's file logger
    truncates its file at start-up), so that a resume, which logs from its checkpoint's step on, loses none."""
    current = folder / "metrics.jsonl"
    if not current.exists() or current.stat().st_size == 0:
        current.unlink(missing_ok=True)
        return None
    kept = folder / ATTEMPT.format(len(earlier_metrics(folder)) + 1)
    current.rename(kept)
    return kept


def tiny_model(folder: Path, prompt_text: tuple[str, ...] = (), vocab_size: int = 600) -> Path:
    """The offline tiny Qwen2 and its tokenizer as a Hugging Face folder (built once); the
    tokenizer's corpus adds ``prompt_text``."""
    from arew.engines.tiny_models import build_chat_tokenizer, build_tiny_model

    if not (folder / "config.json").exists():
        tokenizer = build_chat_tokenizer(prompt_text, vocab_size=vocab_size)
        build_tiny_model(tokenizer).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def prepare_data(task: str, data_dir: Path, source: str | None) -> None:
    from arew.envs.registry import prepare_task

    prepare_task(task, data_dir / task, n_train=32, n_val=4, n_test=4, seed=0, source=source, reuse=True)


def prompt_text(task: str, data_dir: Path) -> tuple[str, ...]:
    """The messages of the task's first training prompt, for a tokenizer trained on them."""
    from arew.envs.rows import read_rows

    return tuple(message["content"] for message in read_rows(data_dir / task / "train.parquet")[0]["prompt"])


def _tiny_model_for(task: str, folder: Path, data_dir: Path) -> Path:
    if task not in PROMPT_TRAINED_TOKENIZER:
        return tiny_model(folder)
    return tiny_model(folder, prompt_text(task, data_dir), PROMPT_TRAINED_TOKENIZER[task])


def read_metrics(path: Path) -> tuple[list[dict[str, float]], dict[str, float]]:
    """(training steps in order, the last validation entry) from verl's file logger JSONL; a line a kill cut short
    (or any line that is not a step's entry) is left out."""
    steps, validation = [], {}
    if not path.exists():
        return steps, validation
    entries, _ = json_lines(path)
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("data"), dict) and isinstance(entry.get("step"), int)):
            continue
        data = {**entry["data"], "step": entry["step"]}
        if "training/global_step" in data:
            steps.append(data)
        elif any(key.startswith("val-") for key in data):
            validation = data
    return steps, validation


def hydra_overrides(
    task: str, algo: str, variant: str, model: Path, folder: Path, steps: int, overrides: list[str], rollout: str = "hf"
) -> list[str]:
    """The recipe's overrides of a smoke run: its groups, model, steps and folder, the small sizes, the user's."""
    return [
        f"task={task}", f"algo={algo}", f"variant={variant}", f"+backend={CPU_ROLLOUT_BACKENDS[rollout]}",
        f"actor_rollout_ref.model.path={model}",
        f"trainer.total_training_steps={steps}",
        f"trainer.default_local_dir={folder / 'checkpoints'}",
        *SMOKE_OVERRIDES, *overrides,
    ]  # fmt: skip


def command(overrides: list[str], config_dir: Path | None = None) -> list[str]:
    return [
        sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", CONFIG_PATH, "--config-name", "recipe",
        *(["--config-dir", str(config_dir)] if config_dir else []), *overrides,
    ]


def check_config(overrides: list[str], config_dir: Path | None, env: dict[str, str]) -> None:
    """The run's config composed and checked in this process as the trainer's start-up checks it, before Ray and
    verl's processes start (half a minute): a bad value is refused at once, naming its key, on the console."""
    from hydra import compose, initialize_config_module

    from arew.verl_plugin.trainer import validate_arew_setup

    searchpath = [f"hydra.searchpath=[pkg://verl.trainer.config,file://{config_dir}]"] if config_dir else []
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # the run's own (AREW_DATA_DIR, VERL_PLATFORM), which its config reads
    try:
        with initialize_config_module("arew.configs", version_base=None):
            validate_arew_setup(compose("recipe", overrides=[*overrides, *searchpath]))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run(
    task: str = "pe-g-s2",
    algo: str = "grpo",
    variant: str = "as_bt",
    out: str | Path = "runs/smoke",
    steps: int = 2,
    overrides: list[str] | tuple[str, ...] = (),
    model: str | Path | None = None,
    source: str | None = None,
    timeout: float | None = None,
    echo: bool = False,
    cluster: bool = False,
    env: dict[str, str] | None = None,
    rollout: str = "hf",
    config_dir: str | Path | None = None,
    check: bool = False,
) -> SmokeRun:
    """Run ``main_ppo`` on the CPU backend in ``out`` (model, data, checkpoints, metrics.jsonl, main_ppo.log);
    ``env`` adds environment variables (e.g. WANDB_MODE) to the run's; ``rollout`` is ``hf`` or ``vllm``;
    ``config_dir`` is a folder of extra Hydra configs (a plugin task's ``task/<name>.yaml``); ``check`` composes and
    checks the config in this process first (:func:`check_config`: ``arew smoke`` does)."""
    if rollout not in CPU_ROLLOUT_BACKENDS:
        raise ValueError(f"rollout: {rollout!r} is not a CPU rollout engine; choose one of {sorted(CPU_ROLLOUT_BACKENDS)}")
    folder = Path(out).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    config_dir = Path(config_dir).resolve() if config_dir is not None else None
    searched = [CONFIG_DIR, *task_config_dirs(), *([config_dir] if config_dir else [])]
    if not any((folder / "task" / f"{task}.yaml").is_file() for folder in searched):
        raise FileNotFoundError(
            f"no Hydra config task/{task}.yaml in {' or '.join(map(str, searched))}; a task package ships it in its "
            "configs/ folder (found through its arew.tasks entry point), or pass a folder with --config-dir"
        )
    data_dir = folder / "data"
    prepare_data(task, data_dir, source)
    model_dir = Path(model).resolve() if model else _tiny_model_for(task, folder / "model", data_dir)
    extra_env = dict(env or {})
    env = {
        **(VLLM_CPU_ENV if rollout == "vllm" else {}),
        **os.environ,
        **extra_env,
        "VERL_PLATFORM": "cpu",
        "HF_HUB_OFFLINE": "1",
        "AREW_DATA_DIR": str(data_dir),
        "VERL_FILE_LOGGER_PATH": str(folder / "metrics.jsonl"),
    }
    if cluster:
        env["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
        # quoted: Ray wants strings, and Hydra would read 1 as an int
        keys = (*CLUSTER_ENV, *(VLLM_CPU_ENV if rollout == "vllm" else ()))
        forwarded = [f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}='{env[key]}'" for key in keys]
        overrides = [*CLUSTER_OVERRIDES, *forwarded, *overrides]
    run_overrides = hydra_overrides(task, algo, variant, model_dir, folder, steps, list(overrides), rollout)
    if check:
        check_config(run_overrides, config_dir, {key: env[key] for key in ("VERL_PLATFORM", "AREW_DATA_DIR")})
    argv = command(run_overrides, config_dir)
    (folder / "command.txt").write_text(shlex.join(argv) + "\n")
    keep_earlier_metrics(folder)
    started = time.perf_counter()
    with open(folder / "main_ppo.log", "w") as log:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            process.kill()

        watchdog = threading.Timer(timeout, kill) if timeout else None  # a hung run must not hang the caller
        if watchdog:
            watchdog.start()
        try:
            for line in process.stdout:
                log.write(line)
                if echo:
                    sys.stdout.write(line)
            returncode = process.wait()
        finally:
            if watchdog:
                watchdog.cancel()
        if timed_out.is_set():
            log.write(f"arew smoke: killed after the {timeout:.0f} s timeout\n")
    result = SmokeRun(folder, returncode, wall_seconds=time.perf_counter() - started)
    result.steps, result.validation = read_metrics(result.metrics_path)
    return result


def summary(result: SmokeRun) -> str:
    history = result.history()
    lines = [
        f"arew smoke: {len(result.steps)} training steps in {result.wall_seconds:.0f} s (exit {result.returncode}), "
        f"{result.start_up_seconds:.0f} s of it start-up and shutdown"
        + (f"; {len(history)} steps in the folder with its earlier runs" if len(history) != len(result.steps) else "")
    ]
    for data in result.steps:
        times = ", ".join(f"{name} {data[key]:.2f}" for name, key in TIMING_KEYS.items() if key in data)
        lines.append(f"  step {data['step']}: {times} s")
        counts = " ".join(
            f"{channel}{{+{data.get(f'arew/{channel}/pos', 0):.0f} 0:{data.get(f'arew/{channel}/zero', 0):.0f} "
            f"-{data.get(f'arew/{channel}/neg', 0):.0f}}}"
            for channel in ("as", "bt")
        )
        lines.append(
            f"    reward {data.get('critic/score/mean', float('nan')):.3f}  critiques {counts}  "
            f"both signs {data.get('arew/both_signs_frac', 0):.2f}  actor/grad_norm {data.get('actor/grad_norm', float('nan')):.4f}"
        )
    missing = sum(data.get("episode/critique_missing/mean", 0.0) for data in history)
    asked = sum(data.get("episode/critique_decisions/mean", 0.0) for data in history)
    if asked:  # a critique source beside the rules (arew_agent.critiques.source)
        share = missing / asked
        lines.append(
            f"  critique source: no label for {share:.0%} of the decisions (arew_agent.critiques.on_missing decided them)"
            + ("; MOST DECISIONS TRAINED WITHOUT THE SOURCE: is its server up? (episode/critique_* in the metrics)" if share > 0.5 else "")
        )
    lines += [f"  metrics: {result.metrics_path}", f"  log:     {result.log_path}"]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arew.envs.registry import task_names

    parser.add_argument("--task", default="pe-g-s2", choices=task_names(), help="a registered task (arew prepare --help lists them)")
    parser.add_argument("--config-dir", default=None,
                        help="a folder of extra Hydra configs for main_ppo, e.g. a plugin task's task/NAME.yaml")  # fmt: skip
    parser.add_argument("--algo", default="grpo", choices=ALGOS)
    parser.add_argument("--variant", default="as_bt", choices=VARIANTS)
    parser.add_argument("--rollout", default="hf", choices=sorted(CPU_ROLLOUT_BACKENDS), help="rollout engine: the hf sampler or verl's vLLM rollout on vLLM's CPU build (default hf)")
    parser.add_argument("--steps", type=int, default=2, help="training steps (default 2)")
    parser.add_argument("--out", default="runs/smoke", help="run folder (default runs/smoke)")
    parser.add_argument("--model", default=None, help="Hugging Face model folder (default: a tiny random Qwen2 built offline)")
    parser.add_argument("--source", default=None, help="raw data for mediq / flodial-* (as for arew prepare)")
    parser.add_argument("--quiet", action="store_true", help="do not echo verl's output")
    parser.add_argument("--cluster", action="store_true", help="join the running Ray cluster at RAY_ADDRESS (a Ray job's command) instead of starting one")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. algorithm.arew.lam=0.5")


def main(args: argparse.Namespace) -> None:
    if args.steps < 1:
        raise SystemExit("--steps must be at least 1")
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        result = run(args.task, args.algo, args.variant, args.out, args.steps, args.overrides, args.model, args.source,
                     echo=not args.quiet, cluster=args.cluster, rollout=args.rollout, config_dir=args.config_dir, check=True)  # fmt: skip
    except (ValueError, KeyError, HydraException, OmegaConfBaseException) as error:  # the config, before any process started
        raise SystemExit(f"arew smoke: {error}") from None
    print(summary(result))
    if result.returncode != 0 or len(result.history()) < args.steps:
        print(f"arew smoke: FAILED (see {result.log_path})", file=sys.stderr)
        raise SystemExit(1)
