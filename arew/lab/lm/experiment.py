"""``arew lm-lab``: self-locking and AReW's escape with a language-model policy, through verl's ``main_ppo``.

The chain, each stage cached or resumed so that a rerun of the same command finishes what is missing:

1. the warm starts (:mod:`arew.lab.lm.warm_start`): a *competent* one, fine-tuned from random weights on
   competent transcripts, which shows whether the task is learnable at this model size, and the *locked* policy
   the experiment trains: the competent build fine-tuned further on locked transcripts, so that the skill is in
   its weights and its habits rarely use it;
2. calibration (:mod:`arew.lab.lm.calibration`): both played on the validation episodes before any RL;
3. the arms: for every algorithm, variant and seed, the recipe a GPU user runs (``task``, ``algo``,
   ``variant`` on ``arew/configs/recipe.yaml``) through :func:`arew.verl_plugin.smoke.run` on the CPU backend
   with the warm start as ``actor_rollout_ref.model.path`` and :meth:`LMLab.overrides` as the sizes;
4. the outputs (:mod:`arew.lab.lm.report`): a table with intervals over seeds, PNG curves, the per-step time
   split, ``arew report``'s offline page; W&B offline runs when ``--wandb`` is given.

``--model PATH`` skips stages 1-2 and trains that model instead (an instruct model on a GPU node: pass the
recipe's own sizes as overrides and leave out the CPU backend: see docs/guides/lm-lab.md).
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from arew.configs import CPU_ROLLOUT_BACKENDS, group_options
from arew.lab.lm.warm_start import SFT_TRAINERS, WarmStart

if TYPE_CHECKING:  # the plugin imports verl (seconds): the command line builds its parser without it
    from arew.verl_plugin.smoke import SmokeRun

COMPETENT = WarmStart(inform=1.0, update=1.0)
LOCKED = WarmStart(inform=0.2, update=0.2, sft_steps=100, base=COMPETENT)
OPTIMIZERS = ("SGD", "AdamW")  # torch.optim classes verl's FSDP optimizer config builds


@dataclass(frozen=True)
class LMLab:
    """One experiment: the warm start, the arms and the RL sizes (every field a command-line option)."""

    warm_start: WarmStart = LOCKED
    algos: tuple[str, ...] = ("grpo",)
    variants: tuple[str, ...] = ("vanilla", "as_only", "as_bt")
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 12
    prompts_per_step: int = 3  # data.train_batch_size
    rollouts_per_prompt: int = 4  # actor_rollout_ref.rollout.n (GRPO's group)
    # plain SGD: Adam's first steps move every parameter by about the learning rate whatever its gradient, and this
    # policy's gradients are tiny and mostly noise; one such step at 3e-4 took a warm start from 0.2 invalid turns
    # an episode to 4.1 (docs/guides/lm-lab.md)
    optimizer: str = "SGD"
    learning_rate: float = 2.0
    # sampling temperature of the rollout and the calibration: at 1.0 a small model's long tail writes invalid text
    # that the transcripts never showed, and one invalid turn is followed by more (measured: docs/guides/lm-lab.md)
    temperature: float = 0.7
    max_tokens_per_turn: int = 96  # the longest scripted turn (a competent question, its scratch the table's two lines) is 87 tokens
    response_length: int = 2048
    rollout: str = "vllm"
    calibration_episodes: int = 16
    extra_overrides: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        checks = {
            "warm_start": self.warm_start.base is not None,  # the locked policy is a fine-tune of the competent one
            "algos": bool(self.algos) and set(self.algos) <= set(group_options("algo")),
            "variants": bool(self.variants) and set(self.variants) <= set(group_options("variant")),
            "seeds": bool(self.seeds),
            "steps": self.steps >= 1,
            "prompts_per_step": self.prompts_per_step >= 1,
            "rollouts_per_prompt": self.rollouts_per_prompt >= 2 or self.algos == ("ppo",),
            "learning_rate": self.learning_rate > 0,
            "optimizer": self.optimizer in OPTIMIZERS,
            "temperature": self.temperature > 0,
            "max_tokens_per_turn": self.max_tokens_per_turn >= 8,
            "response_length": self.response_length >= 4 * self.max_tokens_per_turn,
            "rollout": self.rollout in CPU_ROLLOUT_BACKENDS,
            "calibration_episodes": self.calibration_episodes >= 0,
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"lm-lab {key}: invalid value {getattr(self, key)!r}")

    def arms(self) -> list[tuple[str, str, int]]:
        """(algo, variant, seed) of every run, seed by seed, so that a stopped experiment has every arm's first seeds."""
        return [(algo, variant, seed) for seed in self.seeds for algo in self.algos for variant in self.variants]

    def overrides(self, seed: int, prompt_length: int | None = None) -> list[str]:
        """The run's Hydra overrides beside the smoke run's small sizes (:data:`arew.verl_plugin.smoke.SMOKE_OVERRIDES`);
        ``prompt_length``: ``data.max_prompt_length`` (verl pads every prompt to it; against the task's 2048 it
        shortened the CPU actor's update little: docs/guides/lm-lab.md)."""
        batch = self.prompts_per_step * self.rollouts_per_prompt
        return [
            *([f"data.max_prompt_length={prompt_length}"] if prompt_length else []),
            f"data.train_batch_size={self.prompts_per_step}",
            f"actor_rollout_ref.rollout.n={self.rollouts_per_prompt}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={self.prompts_per_step}",  # one update per step, as the paper's GRPO
            f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={batch}",
            f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={batch}",
            f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={batch}",
            f"critic.ppo_micro_batch_size_per_gpu={batch}",
            f"actor_rollout_ref.actor.optim.optimizer={self.optimizer}",
            f"critic.optim.optimizer={self.optimizer}",
            *(["actor_rollout_ref.actor.optim.weight_decay=0.0", "critic.optim.weight_decay=0.0"] if self.optimizer == "SGD" else []),
            f"actor_rollout_ref.actor.optim.lr={self.learning_rate}",
            f"actor_rollout_ref.rollout.temperature={self.temperature}",
            f"critic.optim.lr={self.learning_rate}",
            f"data.max_response_length={self.response_length}",
            f"arew_agent.max_tokens_per_turn={self.max_tokens_per_turn}",
            "algorithm.arew.noise.neg_to_pos_prob=0.0",  # the smoke run's noise is for a random model: the rules' own critiques here
            f"data.seed={seed}",
            f"actor_rollout_ref.rollout.seed={seed}",
            *self.extra_overrides,
        ]


def run_folder(out: Path, algo: str, variant: str, seed: int) -> Path:
    return out / "runs" / f"{algo}-{variant}" / f"seed{seed}"


def prompt_tokens(model: Path, task: str, data_dir: Path) -> int:
    """The longest prompt of the task's training and validation rows, as the runs prepare them, in ``model``'s tokens
    (rendered as verl's agent loop renders them: the chat template with the generation prompt)."""
    from transformers import AutoTokenizer

    from arew.envs.rows import read_rows
    from arew.verl_plugin.smoke import prepare_data

    prepare_data(task, data_dir, None)
    tokenizer = AutoTokenizer.from_pretrained(model)
    rows = [row for split in ("train", "validation") for row in read_rows(data_dir / task / f"{split}.parquet")]
    return max(len(tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False)) for row in rows)


def train_arms(lab: LMLab, model: Path, out: Path, *, wandb: bool = False, log=print) -> dict[tuple[str, str, int], SmokeRun]:
    """Every arm's finished run; an arm whose folder already logged all its steps is read, not run again."""
    from arew.verl_plugin.smoke import SmokeRun, read_metrics
    from arew.verl_plugin.smoke import run as run_main_ppo

    prompt_length = prompt_tokens(model, lab.warm_start.task, out / "data")
    runs = {}
    for algo, variant, seed in lab.arms():
        folder = run_folder(out, algo, variant, seed)
        done = SmokeRun(folder, 0)
        if len(done.history()) >= lab.steps:
            done.steps, done.validation = read_metrics(done.metrics_path)
            runs[algo, variant, seed] = done
            continue
        logger = "[console,file,wandb]" if wandb else "[console,file]"
        env = {"WANDB_MODE": "offline", "WANDB_DIR": str(folder)} if wandb else {}
        overrides = [*lab.overrides(seed, prompt_length), f"trainer.logger={logger}", f"trainer.experiment_name=lm-lab-{algo}-{variant}-seed{seed}"]
        started = time.perf_counter()
        result = run_main_ppo(lab.warm_start.task, algo, variant, folder, lab.steps, overrides, model, rollout=lab.rollout, env=env, check=True)
        log(f"lm-lab: {algo} {variant} seed {seed}: {len(result.steps)} steps in {time.perf_counter() - started:.0f} s (exit {result.returncode})")
        if result.returncode != 0 or len(result.history()) < lab.steps:
            raise RuntimeError(f"lm-lab: the {algo} {variant} seed {seed} run failed; see {result.log_path}")
        record = {"wall_seconds": result.wall_seconds, "start_up_seconds": result.start_up_seconds}
        (folder / "run.json").write_text(json.dumps(record) + "\n")
        runs[algo, variant, seed] = result
    return runs


def validation_rows(task: str, data_dir: Path, n: int) -> list[dict]:
    """The first ``n`` validation rows of the task's data as the runs prepare it."""
    from arew.envs.registry import prepare_task
    from arew.envs.rows import read_rows

    prepare_task(task, data_dir, n_train=32, n_val=max(n, 4), n_test=4, seed=0, reuse=True)
    return read_rows(data_dir / "validation.parquet")[:n]


def calibrate_warm_starts(lab: LMLab, out: Path, models: dict[str, Path], log=print) -> dict[str, dict]:
    """Each warm start's calibration figures (``calibration/<name>/calibration.json``, read back when it measured the
    same model, at the same temperature, on as many episodes: a rebuilt warm start has another folder name, its hash)."""
    from arew.envs.rows import read_json_record, replaced_whole
    from arew.lab.lm.calibration import calibrate

    rows = validation_rows(lab.warm_start.task, out / "calibration" / "data", lab.calibration_episodes)
    figures = {}
    for name, model in models.items():
        path = out / "calibration" / name / "calibration.json"
        measured = {"model": model.name, "temperature": lab.temperature, "episodes": len(rows)}
        record = read_json_record(path)  # none, torn, or of another measurement: calibrate
        if not isinstance(record, dict) or any(record.get(key) != value for key, value in measured.items()):
            started = time.perf_counter()
            result = calibrate(model, rows, path.parent, max_tokens_per_turn=lab.max_tokens_per_turn, response_length=lab.response_length,
                               temperature=lab.temperature)  # fmt: skip
            record = {**measured, "figures": result, "seconds": time.perf_counter() - started}
            path.parent.mkdir(parents=True, exist_ok=True)
            with replaced_whole(path) as partial:
                partial.write_text(json.dumps(record, indent=2) + "\n")
        figures[name] = record
        log(f"lm-lab: calibration of the {name} warm start: " + ", ".join(
            f"{key} {value['mean']:.3f}" for key, value in figures[name]["figures"].items()))  # fmt: skip
    return figures


def run(lab: LMLab, out: Path, model: Path | None = None, *, wandb: bool = False, log=print) -> Path:
    """The whole chain (see the module docstring); returns the results table's path."""
    from arew.lab.lm import report
    from arew.lab.lm.warm_start import build

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    calibration = {}
    if model is None:
        cache = out / "models"
        models = {"locked": build(lab.warm_start, cache, log), "competent": build(lab.warm_start.base, cache, log)}
        if lab.calibration_episodes:
            calibration = calibrate_warm_starts(lab, out, models, log)
        model = models["locked"]
    runs = train_arms(lab, Path(model).resolve(), out, wandb=wandb, log=log)
    settings = {"lab": asdict(lab), "model": str(model.name), "wall_seconds": time.perf_counter() - started}
    return report.write(out, runs, calibration, settings)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = LMLab()
    parser.add_argument("--out", default="runs/lm-lab", help="output folder (default runs/lm-lab); a rerun resumes")
    parser.add_argument("--algos", default=",".join(defaults.algos), help="comma-separated recipe algorithms (default grpo)")
    parser.add_argument("--variants", default=",".join(defaults.variants), help="comma-separated recipe variants (default vanilla,as_only,as_bt)")
    parser.add_argument("--seeds", type=int, default=len(defaults.seeds), help="seeds 0..n-1 (default 3)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help=f"RL steps per run (default {defaults.steps})")
    parser.add_argument("--prompts-per-step", type=int, default=defaults.prompts_per_step, help="data.train_batch_size")
    parser.add_argument("--rollouts-per-prompt", type=int, default=defaults.rollouts_per_prompt, help="actor_rollout_ref.rollout.n")
    parser.add_argument("--optimizer", default=defaults.optimizer, choices=OPTIMIZERS, help=f"actor (and critic) optimizer (default {defaults.optimizer}; SGD without weight decay)")
    parser.add_argument("--lr", type=float, default=defaults.learning_rate, help=f"actor (and critic) learning rate (default {defaults.learning_rate})")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help=f"sampling temperature of the rollout and the calibration (default {defaults.temperature})")
    parser.add_argument("--rollout", default=defaults.rollout, choices=sorted(CPU_ROLLOUT_BACKENDS), help="rollout engine (default vllm: its steps are faster from the third on; hf starts faster: see the docs)")
    parser.add_argument("--inform", type=float, default=LOCKED.inform, help="the locked warm start's share of informative questions")
    parser.add_argument("--update", type=float, default=LOCKED.update, help="the locked warm start's share of real belief updates")
    parser.add_argument("--sft-steps", type=int, default=COMPETENT.sft_steps, help="SFT steps of the competent warm start, from random weights")
    parser.add_argument("--lock-steps", type=int, default=LOCKED.sft_steps, help="SFT steps that turn the competent warm start into the locked one")
    parser.add_argument("--sft-episodes", type=int, default=LOCKED.episodes, help="scripted transcripts of each warm start")
    parser.add_argument("--sft-trainer", default=COMPETENT.sft_trainer, choices=SFT_TRAINERS,
                        help="lab: the lab's own SFT loop (default); verl: verl's SFT trainer on the CPU backend (slower a step)")  # fmt: skip
    parser.add_argument("--calibration-episodes", type=int, default=defaults.calibration_episodes, help="validation episodes per warm start (0: skip)")
    parser.add_argument("--model", default=None, help="train this Hugging Face model folder instead of the warm start (no build, no calibration)")
    parser.add_argument("--wandb", action="store_true", help="also log each run to W&B, offline (wandb sync uploads it later)")
    parser.add_argument("--publish", default=None, metavar="PAGE",
                        help="write the tables into this Markdown page's lm-lab blocks and the curves beside it (docs/guides/lm-lab.md)")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")


def command_line(args: argparse.Namespace) -> str:
    """The ``arew lm-lab`` command that reproduces ``args``, every option spelled out (for the published page)."""
    options = {key: value for key, value in vars(args).items() if key not in ("command", "func", "overrides", "publish")}
    parts = ["arew", "lm-lab"]
    for key, value in options.items():
        if value is None or value is False:
            continue
        parts += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return shlex.join([*parts, *args.overrides])


def main(args: argparse.Namespace) -> None:
    try:
        competent = replace(COMPETENT, sft_steps=args.sft_steps, episodes=args.sft_episodes, sft_trainer=args.sft_trainer)
        warm_start = replace(LOCKED, inform=args.inform, update=args.update, sft_steps=args.lock_steps, episodes=args.sft_episodes,
                             sft_trainer=args.sft_trainer, base=competent)  # fmt: skip
        lab = LMLab(
            warm_start=warm_start, algos=tuple(filter(None, args.algos.split(","))), variants=tuple(filter(None, args.variants.split(","))),
            seeds=tuple(range(args.seeds)), steps=args.steps, prompts_per_step=args.prompts_per_step,
            rollouts_per_prompt=args.rollouts_per_prompt, optimizer=args.optimizer, learning_rate=args.lr, temperature=args.temperature, rollout=args.rollout,
            calibration_episodes=args.calibration_episodes, extra_overrides=tuple(args.overrides),
        )  # fmt: skip
    except ValueError as error:
        raise SystemExit(str(error)) from None
    page = Path(args.publish) if args.publish else None
    if page is not None:
        from arew.lab.lm.report import PUBLISHED_BLOCKS
        from arew.reporting.markdown_blocks import BlockError, replace_block

        try:  # before hours of training: the page must take every block
            for name in PUBLISHED_BLOCKS:
                replace_block(page.read_text(), name, "")
        except (OSError, BlockError) as error:
            raise SystemExit(f"arew lm-lab --publish {page}: {error}") from None
    path = run(lab, Path(args.out), Path(args.model) if args.model else None, wandb=args.wandb)
    print(f"arew lm-lab: {path}")
    if page is not None:
        from arew.lab.lm.report import publish

        publish(path.parent, page, command_line(args))
        print(f"arew lm-lab: published in {page}")
