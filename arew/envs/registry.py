"""Tasks by name: each names its environment class and its data preparation, imported on first use.

A package adds tasks without a line of AReW changed: it declares a sequence of :class:`TaskSpec`
and points an entry point of the ``arew.tasks`` group at it in its ``pyproject.toml``::

    [project.entry-points."arew.tasks"]
    my_tasks = "my_package.tasks:TASK_SPECS"

The built-in tasks are packages of their own under ``envs/`` and register the same way. Everything that takes a
task name reads this one registry: ``arew prepare``, ``arew eval``, ``arew smoke``, the agent loop
and the trainer's start-up checks. Specs name their code as ``"package.module:attribute"`` strings,
imported when a task is used, so listing the tasks never pays for a task's heavy dependencies (tau2's
package takes most of a second to import).
:func:`register` adds tasks in-process (a notebook, a test).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arew.envs.base import ActiveReasoningEnv
from arew.envs.options import check_options
from arew.envs.rows import SPLIT_ORDER, read_json_record, replaced_whole
from arew.envs.users import USER_OPTIONS, make_user, split_user_options
from arew.plugins import NAME, TARGET, PluginRegistry, load_target

ENTRY_POINT_GROUP = "arew.tasks"
SOURCE_MODES = ("none", "optional", "required")


class TaskRegistryError(ValueError):
    """A task declared wrongly (a bad name or target, a clash between packages, a target that does not load)."""


@dataclass(frozen=True)
class TaskSpec:
    """One task. ``env`` and ``prepare`` are ``"package.module:attribute"`` strings, imported on first use.

    ``prepare(task, out_dir, *, n_train, n_val, n_test, seed, source)`` writes the verl parquet splits
    (:func:`arew.envs.rows.write_splits`) and returns their paths. ``source`` says whether the task is
    built from raw data the user gives (``--source``): "none" (synthetic), "optional" or "required";
    ``source_help`` says what that data is.

    Three optional targets: ``generate(task, sizes, seed)`` returns the ``extra_info`` rows of each split in
    memory (``sizes`` maps a split name to its row count; a synthetic task's rows, for the CPU lab, which trains
    without writing files); ``audit`` names the package's critique audits, a sequence of
    :class:`arew.audit.runner.TaskAudit` (``arew.audit.audits`` collects them, ``benchmarks/critique_exploits.py``
    plays them); ``demonstrations(inform, update, seed)`` returns a scripted player (an
    :class:`arew.audit.runner.Policy` for one episode) whose question informativeness and belief-update quality
    are probabilities, whose transcripts fine-tune a language model before RL (``arew lm-lab``).
    """

    name: str
    env: str
    prepare: str
    description: str
    source: str = "none"
    source_help: str = ""
    generate: str = ""
    audit: str = ""
    demonstrations: str = ""

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise TaskRegistryError(f"task name {self.name!r}: use lower-case letters, digits, '-', '_' or '.'")
        for field_name in ("env", "prepare", "generate", "audit", "demonstrations"):
            target = getattr(self, field_name)
            if (target or field_name in ("env", "prepare")) and not TARGET.fullmatch(target):
                raise TaskRegistryError(
                    f"task {self.name!r}: {field_name}={getattr(self, field_name)!r} is not 'package.module:attribute'"
                )
        if self.source not in SOURCE_MODES:
            raise TaskRegistryError(f"task {self.name!r}: source={self.source!r}, expected one of {list(SOURCE_MODES)}")
        if self.source != "none" and not self.source_help:
            raise TaskRegistryError(f"task {self.name!r}: a task that reads --source says what it is in source_help")


TASKS: PluginRegistry[TaskSpec] = PluginRegistry(ENTRY_POINT_GROUP, TaskSpec, "task", TaskRegistryError)


def register(*specs: TaskSpec) -> None:
    """Add tasks in this process; a name may not clash with an installed task's (registering it again replaces it)."""
    TASKS.register(*specs)


def unregister(name: str) -> None:
    """Remove a task added by :func:`register`."""
    TASKS.unregister(name)


def task_specs() -> dict[str, TaskSpec]:
    """Every known task by name: the installed packages' and those added by :func:`register`."""
    return TASKS.specs()


def task_names() -> tuple[str, ...]:
    return tuple(task_specs())


def task_spec(task_name: str) -> TaskSpec:
    return TASKS.spec(task_name)


def _load(spec: TaskSpec, field_name: str) -> Any:
    target = getattr(spec, field_name)
    return load_target(target, TaskRegistryError, f"task {spec.name!r}: cannot import {field_name}")


def env_class(task_name: str) -> type[ActiveReasoningEnv]:
    spec = task_spec(task_name)
    loaded = _load(spec, "env")
    if not (isinstance(loaded, type) and issubclass(loaded, ActiveReasoningEnv)):
        raise TaskRegistryError(f"task {task_name!r}: {spec.env} is not an ActiveReasoningEnv subclass")
    return loaded


def check_env_options(task_name: str, options: dict[str, Any], prefix: str = "arew_agent.env_options") -> None:
    """At start-up: every option is one the task declares (or a user option, for tasks with a user) and valid."""
    task_class = env_class(task_name)
    check_options(task_class, options, prefix, USER_OPTIONS if task_class.TAKES_USER_OPTIONS else ())
    task_class.check_option_values(options, prefix)
    if task_class.TAKES_USER_OPTIONS:
        user_options, _ = split_user_options(options)
        try:
            make_user(**user_options)
            make_user(**{**user_options, "user": "llm"})  # the LLM settings are checked even while the user is offline
        except (TypeError, ValueError) as error:
            raise ValueError(f"{prefix}.{error}") from None


def make_env(task_name: str, extra_info: dict[str, Any], seed: int, **options: Any) -> ActiveReasoningEnv:
    """Build the episode of one dataset row; ``options`` go to the task's constructor."""
    task_class = env_class(task_name)
    if extra_info.get("task", task_name) != task_name:
        raise ValueError(f"row belongs to task {extra_info['task']!r}, not {task_name!r}")
    return task_class.from_row(extra_info, seed, **options)


def generate_rows(task_name: str, sizes: dict[str, int], seed: int) -> dict[str, list[dict[str, Any]]]:
    """Each split's ``extra_info`` rows, generated in memory by the task's ``generate`` (synthetic tasks only)."""
    spec = task_spec(task_name)
    if not spec.generate:
        raise TaskRegistryError(f"task {task_name!r} generates no rows in memory (its spec has no generate); prepare its files instead")
    return _load(spec, "generate")(task_name, sizes, seed)


def demonstration_player(task_name: str, inform: float, update: float, seed: int) -> Any:
    """One episode's scripted player of the task's ``demonstrations`` (see :class:`TaskSpec`)."""
    spec = task_spec(task_name)
    if not spec.demonstrations:
        raise TaskRegistryError(f"task {task_name!r} has no scripted demonstrations (its spec names none)")
    return _load(spec, "demonstrations")(inform, update, seed)


def load_audits() -> list[Any]:
    """The audits every task spec names (``audit``), each package's module loaded once."""
    loaded: dict[str, Any] = {}
    for spec in task_specs().values():
        if spec.audit and spec.audit not in loaded:
            loaded[spec.audit] = _load(spec, "audit")
    return [audit for audits in loaded.values() for audit in audits]


def prepare_task(
    task_name: str, out_dir: str | Path, n_train: int, n_val: int, n_test: int, seed: int, source: str | None = None,
    reuse: bool = False,
) -> dict[str, Path]:
    """Write the task's verl parquet splits; ``source`` is the raw data of tasks built from public files
    (for tau2, which ships its data, the task set; the sizes cap its splits).

    The folder's ``prepared.json`` records what made its files (:data:`PREPARED`), written after the last split
    and removed before the first: ``reuse`` returns the files as they are when that record is this request's,
    and prepares them again otherwise (another seed, size or source; an interrupted preparation, which left no
    record)."""
    out = Path(out_dir)
    request = {"task": task_name, "n_train": n_train, "n_val": n_val, "n_test": n_test, "seed": seed, "source": _source_key(source)}
    for flag, size, least in (("--n-train", n_train, 1), ("--n-val", n_val, 0), ("--n-test", n_test, 0)):
        if isinstance(size, bool) or not isinstance(size, int) or size < least:
            raise ValueError(f"{flag}: rows of that split, at least {least}, got {size!r}")
    spec = task_spec(task_name)
    if spec.source == "none" and source is not None:
        raise ValueError(f"task {task_name!r} is synthetic; it takes no --source")
    if spec.source == "required" and source is None:
        raise ValueError(f"task {task_name!r} needs --source: {spec.source_help}")
    record = out / PREPARED
    if reuse and read_json_record(record) == request:
        return {split: out / f"{split}.parquet" for split in SPLIT_ORDER}
    prepare: Callable[..., dict[str, Path]] = _load(spec, "prepare")
    record.unlink(missing_ok=True)
    paths = prepare(task_name, out_dir, n_train=n_train, n_val=n_val, n_test=n_test, seed=seed, source=source)
    with replaced_whole(record) as partial:
        partial.write_text(json.dumps(request, sort_keys=True) + "\n")
    return paths


PREPARED = "prepared.json"
"""The record of what made a folder's splits: the task, the sizes, the seed and the source (its path with the
size and modification time of the file or folder it names, so that changed raw data is prepared again)."""


def _source_key(source: str | None) -> Any:
    if source is None or not Path(source).exists():
        return source  # None, or a name (tau2's task set)
    stat = Path(source).resolve().stat()
    return {"path": str(Path(source).resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def describe(specs: Sequence[TaskSpec] | None = None) -> str:
    """The tasks, one paragraph each, for the epilog of a command's help."""
    lines = ["tasks (arew/envs/registry.py; packages add their own):"]
    for spec in specs if specs is not None else task_specs().values():
        needs = {"none": "", "optional": "\n      --source (optional): ", "required": "\n      --source (required): "}
        lines.append(f"  {spec.name}: {spec.description}{needs[spec.source]}{spec.source_help}")
    return "\n".join(lines)
