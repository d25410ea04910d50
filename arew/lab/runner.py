"""``arew lab``: train every (variant, seed) pair, then write the table, curves and logs.

Runs are independent and single-threaded (``train_run`` pins one torch thread), so with
more than one worker they are spread over forked processes; the progress bar counts steps.
``arew.cli`` imports this module to build its parser, so training (and verl) is imported
only when the lab actually runs, keeping ``arew --help`` fast.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import time
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from arew.lab.config import DEFAULT_VARIANTS, QUICK, LabConfig, Variant, parse_variant
from envs.preference.generator import VARIANTS

_progress_queue = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/lab", help="output folder (default: runs/lab)")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds 0..n-1 (default 3; 1 with --quick)")
    parser.add_argument("--steps", type=int, default=None, help=f"training steps per run (default {LabConfig.steps})")
    parser.add_argument(
        "--task", default=LabConfig.task, choices=sorted(VARIANTS), help=f"PE variant (default {LabConfig.task})"
    )
    parser.add_argument(
        "--variants",
        default=None,
        help="comma-separated <ppo|grpo>-<vanilla|as|bt|as+bt|ir>[-flip<alpha>] (default: "
        + ",".join(DEFAULT_VARIANTS)
        + ")",
    )
    parser.add_argument(
        "--lam", type=float, default=None, help=f"AReW strength lambda (default {LabConfig.arew_lambda})"
    )
    parser.add_argument(
        "--grouping",
        choices=("pooled", "separate"),
        default=None,
        help=f"AReW P/N sets per trajectory or per channel (default {LabConfig.grouping})",
    )
    parser.add_argument(
        "--salience",
        type=float,
        default=None,
        help=f"initial AS preference for obvious comparisons; higher = fewer informative queries "
        f"at the start, deeper in the locking regime (default {LabConfig.salience_init})",
    )
    parser.add_argument(
        "--study",
        default=None,
        help="run a robustness study of arew.lab.studies instead of the default variants, "
        "or 'all' of them (writes <out>/<study>/); see `arew lab --study list`",
    )
    parser.add_argument("--quick", action="store_true", help="tiny setting that runs in seconds (for tests)")
    parser.add_argument("--workers", type=int, default=None, help="parallel processes (default: min(2, CPUs))")


def build_config(args: argparse.Namespace) -> LabConfig:
    """LabConfig from the command line: defaults, then ``--quick``, then explicit options."""
    overrides: dict = dict(QUICK) if args.quick else {}
    overrides["task"] = args.task
    if args.seeds is not None:
        if args.seeds < 1:
            raise SystemExit("--seeds must be at least 1")
        overrides["seeds"] = tuple(range(args.seeds))
    if args.steps is not None:
        if args.steps < 1:
            raise SystemExit("--steps must be at least 1")
        overrides["steps"] = args.steps
    if args.variants:
        names = tuple(name.strip() for name in args.variants.split(",") if name.strip())
        try:
            for name in names:
                parse_variant(name)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        overrides["variants"] = names
    if args.lam is not None:
        overrides["arew_lambda"] = args.lam
    if args.grouping is not None:
        overrides["grouping"] = args.grouping
    if args.salience is not None:
        overrides["salience_init"] = args.salience
    return replace(LabConfig(), **overrides)


def _init_worker(progress) -> None:
    global _progress_queue
    _progress_queue = progress


def _run_job(job: tuple[LabConfig, Variant, int]):
    from arew.lab.train import train_run

    config, variant, seed = job
    return train_run(config, variant, seed, progress=_progress_queue.put)


def run_all(config: LabConfig, workers: int, bar: tqdm, jobs: list | None = None) -> list:
    """Every (variant, seed) run of ``config`` (or the given ``(config, variant, seed)`` jobs);
    ``bar`` advances by one per training step."""
    from arew.lab.train import train_run

    if jobs is None:
        jobs = [(config, parse_variant(name), seed) for name in config.variants for seed in config.seeds]
    if workers <= 1:
        return [train_run(job_config, variant, seed, progress=bar.update) for job_config, variant, seed in jobs]
    context = mp.get_context("fork")
    progress = context.Queue()
    with context.Pool(workers, initializer=_init_worker, initargs=(progress,)) as pool:
        pending = pool.map_async(_run_job, jobs, chunksize=1)
        while not pending.ready():
            try:
                bar.update(progress.get(timeout=0.2))
            except queue.Empty:
                pass
        results = pending.get()
    while not progress.empty():
        bar.update(progress.get())
    return results


def run_key(config: LabConfig, variant: Variant, seed: int) -> tuple:
    """What a run's result depends on: equal keys give equal runs, whatever the arms' labels."""
    arew = variant.arew_config(config.arew_lambda, config.ir_coef, noise_seed=seed, grouping=config.grouping)
    return (repr(config), repr(replace(variant, name="", overrides=())), repr(arew), seed)


def run_study(study, base: LabConfig, workers: int, done: dict[tuple, object]) -> tuple[list, float]:
    """The study's runs, relabelled to its arms, and the seconds spent; ``done`` (run key -> result)
    holds the runs of earlier studies, which are reused (studies share arms such as ppo-vanilla)
    and receives the new ones."""
    config = study.config(base)
    plan = [(run_key(config, v, seed), v, seed) for v in study.variants() for seed in config.seeds]
    todo: dict[tuple, tuple] = {}
    for key, variant, seed in plan:
        if key not in done:
            todo.setdefault(key, (config, variant, seed))
    started = time.perf_counter()
    if todo:
        label = f"arew lab --study {study.name}: {len(todo)} runs ({len(plan) - len(todo)} reused)"
        with tqdm(total=len(todo) * config.steps, desc=label, unit="step", mininterval=1.0) as bar:
            done.update(zip(todo, run_all(config, min(workers, len(todo)), bar, list(todo.values()))))
    return [replace(done[key], variant=variant.name) for key, variant, _ in plan], time.perf_counter() - started


def study_main(args: argparse.Namespace, base: LabConfig, workers: int) -> None:
    """Run the chosen studies one after the other, writing each one's folder as soon as it is done."""
    from arew.lab.report import write_outputs
    from arew.lab.studies import STUDIES

    if args.study == "list":
        for study in STUDIES.values():
            print(f"{study.name}: {study.description}")
            print("  " + ", ".join(a.label for a in study.arms))
        return
    if args.variants:
        raise SystemExit("--variants and --study exclude each other (a study names its arms)")
    if args.study != "all" and args.study not in STUDIES:
        raise SystemExit(f"unknown study {args.study!r}; known: {', '.join(STUDIES)}, all, list")
    studies = list(STUDIES.values()) if args.study == "all" else [STUDIES[args.study]]
    done: dict[tuple, object] = {}
    total = 0.0
    for study in studies:
        results, wall = run_study(study, base, workers, done)
        total += wall
        out = Path(args.out) / study.name
        meta = {"study": study.to_dict(), "invocation": {"study": args.study, "wall_seconds_so_far": total}}
        write_outputs(
            out,
            study.config(base),
            results,
            wall,
            variants=study.variants(),
            extra_columns=study.table_columns,
            metrics=dict(study.curves),
            meta=meta,
        )
        print(f"\n{study.name} ({out}, {wall:.0f} s for its new runs): {study.description}")
        print((out / "results.md").read_text(), end="", flush=True)
    print(f"arew lab --study {args.study}: {len(done)} distinct runs in {total:.0f} s")


def main(args: argparse.Namespace) -> None:
    from arew.lab.report import write_outputs

    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    if getattr(args, "study", None):
        return study_main(args, build_config(args), workers)
    config = build_config(args)
    n_runs = len(config.variants) * len(config.seeds)
    started = time.perf_counter()
    with tqdm(total=n_runs * config.steps, desc=f"arew lab: {n_runs} runs", unit="step", mininterval=1.0) as bar:
        results = run_all(config, min(workers, n_runs), bar)
    wall = time.perf_counter() - started
    paths = write_outputs(Path(args.out), config, results, wall)
    print(f"arew lab: {n_runs} runs of {config.steps} steps on {config.task} in {wall:.0f} s")
    print((Path(args.out) / "results.md").read_text(), end="")
    for name, path in paths.items():
        print(f"{name}: {path}")
