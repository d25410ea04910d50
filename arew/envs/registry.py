"""Task name -> environment class, for the agent loop's dispatch on ``extra_info["task"]``.

tau2 telecom is imported on first use: its package takes most of a second to import and is
only needed by runs of that task.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from arew.envs.base import ActiveReasoningEnv
from arew.envs.flodial import VARIANTS as FLODIAL_VARIANTS
from arew.envs.flodial import FloDialEnv
from arew.envs.flodial.data import write_parquet as write_flodial_parquet
from arew.envs.mediq import TASK as MEDIQ
from arew.envs.mediq import MediQEnv
from arew.envs.mediq.data import write_parquet as write_mediq_parquet
from arew.envs.options import check_options
from arew.envs.preference import VARIANTS, PreferenceEnv
from arew.envs.preference.data import write_parquet as write_preference_parquet
from arew.envs.users import USER_OPTIONS, make_user, split_user_options

TAU2_TASKS = ("tau2-solo", "tau2-dual")


def _tau2_env() -> type[ActiveReasoningEnv]:
    from arew.envs.tau2.env import Tau2Env

    return Tau2Env


_CLASSES: dict[str, Callable[[], type[ActiveReasoningEnv]]] = {name: lambda: PreferenceEnv for name in VARIANTS}
_CLASSES[MEDIQ] = lambda: MediQEnv
_CLASSES.update({name: lambda: FloDialEnv for name in FLODIAL_VARIANTS})
_CLASSES.update({name: _tau2_env for name in TAU2_TASKS})
TASKS: tuple[str, ...] = tuple(_CLASSES)

# the tasks whose raw data must be given (tau2 ships its own)
SOURCE_HELP = {
    MEDIQ: "a MediQ jsonl file (e.g. all_dev_good.jsonl) or its http(s) URL",
    **{name: "a folder of FloDial flowchart json files (knowledge-sources)" for name in FLODIAL_VARIANTS},
}


def env_class(task_name: str) -> type[ActiveReasoningEnv]:
    if task_name not in _CLASSES:
        raise KeyError(f"unknown task {task_name!r}; known: {', '.join(TASKS)}")
    return _CLASSES[task_name]()


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


def prepare_task(
    task_name: str, out_dir: str | Path, n_train: int, n_val: int, n_test: int, seed: int, source: str | None = None
) -> dict[str, Path]:
    """Write the task's verl parquet splits; ``source`` is the raw data for tasks built from public files
    (for tau2, which ships its data, the task set; the sizes cap its splits)."""
    env_class(task_name)
    if task_name in TAU2_TASKS:
        from arew.envs.tau2.tasks import write_parquet as write_tau2_parquet

        return write_tau2_parquet(task_name, out_dir, source or "base", n_train, n_val, n_test, seed)
    if task_name in VARIANTS:
        if source is not None:
            raise ValueError(f"task {task_name!r} is synthetic; it takes no --source")
        return write_preference_parquet(task_name, out_dir, n_train, n_val, n_test, seed)
    if source is None:
        raise ValueError(f"task {task_name!r} needs --source: {SOURCE_HELP[task_name]}")
    if task_name == MEDIQ:
        return write_mediq_parquet(source, out_dir, n_train, n_val, n_test, seed)
    return write_flodial_parquet(source, task_name, out_dir, n_train, n_val, n_test, seed)
