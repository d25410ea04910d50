"""``arew lab``: train every (variant, seed) pair, then write the table, curves and logs.

Runs are independent and single-threaded (``train_run`` pins one torch thread). They train in
worker processes started with :data:`arew.lab.reproducibility.PINNED_ENVIRONMENT` (the same
numbers on every x86-64 machine of one CPU vendor), as many as ``--workers``; the progress bar counts steps.
``arew.cli`` imports this module to build its parser, so training (and verl) is imported
only when the lab actually runs, keeping ``arew --help`` fast.
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import importlib.util
import json
import multiprocessing as mp
import os
import queue
import time
from dataclasses import asdict, replace
from pathlib import Path

from tqdm import tqdm

from arew.envs.registry import task_names
from arew.envs.rows import read_json_record
from arew.lab.config import DEFAULT_VARIANTS, QUICK, LabConfig, Variant, parse_variant
from arew.lab.reproducibility import PINNED_ENVIRONMENT

_progress_queue = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="runs/lab", help="output folder (default: runs/lab)")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds 0..n-1 (default 10; 1 with --quick)")
    parser.add_argument("--steps", type=int, default=None, help=f"training steps per run (default {LabConfig.steps})")
    parser.add_argument(
        "--task",
        default=LabConfig.task,
        help=f"a preference-estimation task, pe-g-s2, pe-g-s3, pe-f-d6 or pe-f-d8 (default {LabConfig.task})",
    )
    parser.add_argument(
        "--variants",
        default=None,
        help="comma-separated <ppo|grpo|gigpo|tgrpo>-<vanilla|as|bt|as+bt|ir|synact>[-synact][-judge<accuracy>]"
        "[-flip<alpha>][-adaptive] (default: " + ",".join(DEFAULT_VARIANTS) + ")",
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
    if not args.task.startswith("pe-") or args.task not in task_names():
        pe_tasks = (
            ", ".join(name for name in task_names() if name.startswith("pe-")) or "none: pip install -e envs/preference"
        )
        raise SystemExit(
            f"--task: the lab's agent plays preference estimation; {args.task!r} is not one of the installed PE tasks ({pe_tasks})"
        )
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


def run_all(workers: int, bar: tqdm, jobs: list, on_result=None) -> list:
    """The ``(config, variant, seed)`` jobs' runs, in job order; ``bar`` advances by one per training step;
    ``on_result(job, result)`` is called as each run finishes (in the parent process)."""
    done = on_result or (lambda job, result: None)
    context = mp.get_context("spawn")  # a fresh interpreter reads the pins before numpy and torch start
    saved = dict(os.environ)
    os.environ.update(PINNED_ENVIRONMENT)  # spawned workers inherit the environment of the moment
    try:
        progress = context.Queue()
        pool = context.Pool(max(1, workers), initializer=_init_worker, initargs=(progress,))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    with pool:
        pending = [pool.apply_async(_run_job, (job,), callback=lambda r, job=job: done(job, r)) for job in jobs]
        while not all(p.ready() for p in pending):
            try:
                bar.update(progress.get(timeout=0.2))
            except queue.Empty:
                pass
        results = [p.get() for p in pending]
    while not progress.empty():
        bar.update(progress.get())
    return results


TRAINING_ROOTS = ("arew.lab.train", "arew_preference")
"""Where a lab run's code starts: the lab's trainer and the task family it trains on (loaded through the task registry)."""


def _source_file(module: str) -> Path | None:
    """The file of a project module, found from its top-level package's folder without importing the module."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None  # a name imported from a module, not a module


def _project_imports(tree: ast.AST) -> set[str]:
    """Every project module a source file may import, at its top or inside a function: ``from a.b import c``
    names ``a.b`` and ``a.b.c`` (which is a module or not), and each module brings its parent packages."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    parents = {".".join(name.split(".")[:i]) for name in names for i in range(1, name.count(".") + 1)}
    return {name for name in names | parents if name == "arew" or name.startswith(("arew.", "arew_"))}


def training_sources() -> dict[str, Path]:
    """The project's source files a lab run can execute: the import closure of ``TRAINING_ROOTS`` within this
    project, read from the sources (only the top-level packages are imported, to find their folders), so the output
    writers (report, publish) and the command line are not in it."""
    found: dict[str, Path] = {}
    todo = list(TRAINING_ROOTS)
    while todo:
        name = todo.pop()
        if name in found or (path := _source_file(name)) is None:
            continue
        found[name] = path
        todo.extend(_project_imports(ast.parse(path.read_bytes())))
    return dict(sorted(found.items()))


@functools.cache
def source_fingerprint() -> str:
    """A hash of :func:`training_sources`: a cached run is reused only by the code that computed it (once per process)."""
    digest = hashlib.sha1()
    for name, path in training_sources().items():
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def run_key(config: LabConfig, variant: Variant, seed: int) -> str:
    """What a run's result depends on: equal keys give equal runs, whatever the arms' labels (the
    config's list of variants and seeds is not part of it). The training code's fingerprint is part of it,
    so a run cached before the code changed is trained again rather than reused."""
    from arew.lab.train import LOG_COLUMNS

    arew = variant.arew_config(config.arew_lambda, config.ir_coef, noise_seed=seed, grouping=config.grouping)
    parts = (
        replace(config, variants=(), seeds=()),
        replace(variant, name="", overrides=()),
        arew,
        seed,
        dict(PINNED_ENVIRONMENT),
        LOG_COLUMNS,
        source_fingerprint(),
    )
    return "\n".join(map(repr, parts))


class RunCache:
    """Finished study runs on disk, ``<out>/cache/<sha1 of the run key>.json``, so that an
    interrupted ``arew lab --study`` resumes where it stopped (a run is deterministic given its key)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / f"{hashlib.sha1(key.encode()).hexdigest()}.json"

    def get(self, key: str):
        from arew.lab.train import RunResult

        payload = read_json_record(self._path(key))  # none, or torn by a disk that failed it: run again
        if not isinstance(payload, dict) or payload.get("key") != key:
            return None
        try:
            return RunResult(**payload["result"])
        except (KeyError, TypeError):  # a record of another version's fields
            return None

    def put(self, key: str, result) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self._path(key).with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "result": asdict(result)}))
        tmp.replace(self._path(key))


def run_cached(
    config: LabConfig, variants: list[Variant], workers: int, cache: RunCache, label: str
) -> tuple[list, float]:
    """Every (variant, seed) run of ``config`` in variant then seed order, relabelled to the variants' names, and
    the seconds spent; runs already in ``cache`` (a study shares arms such as ppo-vanilla with the default run and
    with other studies, or an invocation was interrupted) are reused. Runs go seed by seed, so an interrupted
    invocation has its first seeds complete."""
    plan = [(run_key(config, v, seed), v, seed) for seed in config.seeds for v in variants]
    found = {key: cache.get(key) for key, _, _ in plan}
    todo: dict[str, tuple] = {}
    for key, variant, seed in plan:
        if found[key] is None:
            todo.setdefault(key, (config, variant, seed))
    started = time.perf_counter()
    if todo:
        keys = {id(job): key for key, job in todo.items()}
        label = f"{label}: {len(todo)} runs ({len(set(found)) - len(todo)} reused)"
        with tqdm(total=len(todo) * config.steps, desc=label, unit="step", mininterval=1.0) as bar:
            results = run_all(
                min(workers, len(todo)), bar, list(todo.values()), lambda job, r: cache.put(keys[id(job)], r)
            )
        found.update(zip(todo, results))
    order = {v.name: i for i, v in enumerate(variants)}
    runs = sorted(plan, key=lambda p: (order[p[1].name], p[2]))
    return [replace(found[key], variant=variant.name) for key, variant, _ in runs], time.perf_counter() - started


def run_study(study, base: LabConfig, workers: int, cache: RunCache) -> tuple[list, float]:
    """The study's runs, relabelled to its arms, and the seconds spent (:func:`run_cached`)."""
    return run_cached(study.config(base), study.variants(), workers, cache, f"arew lab --study {study.name}")


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
    cache = RunCache(Path(args.out) / "cache")
    total = 0.0
    for study in studies:
        results, wall = run_study(study, base, workers, cache)
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
    print(f"arew lab --study {args.study}: done in {total:.0f} s (runs reused from {cache.folder} included)")


def main(args: argparse.Namespace) -> None:
    from arew.lab.report import write_outputs

    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    if getattr(args, "study", None):
        return study_main(args, build_config(args), workers)
    config = build_config(args)
    out = Path(args.out)
    cache = RunCache(out / "cache")
    variants = [parse_variant(name) for name in config.variants]
    results, wall = run_cached(config, variants, workers, cache, "arew lab")
    paths = write_outputs(out, config, results, wall)
    print(
        f"arew lab: {len(results)} runs of {config.steps} steps on {config.task} in {wall:.0f} s (runs reused from {cache.folder} included)"
    )
    print((out / "results.md").read_text(), end="")
    for name, path in paths.items():
        print(f"{name}: {path}")
