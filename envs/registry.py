"""Task name -> environment factory, for the agent loop's dispatch on ``extra_info["task"]``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from envs.base import ActiveReasoningEnv
from envs.flodial import VARIANTS as FLODIAL_VARIANTS
from envs.flodial import FloDialEnv
from envs.flodial.data import write_parquet as write_flodial_parquet
from envs.mediq import TASK as MEDIQ
from envs.mediq import MediQEnv
from envs.mediq.data import write_parquet as write_mediq_parquet
from envs.options import check_options
from envs.preference import VARIANTS, PreferenceEnv
from envs.preference.data import write_parquet as write_preference_parquet
from envs.users import USER_OPTIONS, make_user, split_user_options

_FACTORIES: dict[str, Callable[..., ActiveReasoningEnv]] = {name: PreferenceEnv.from_row for name in VARIANTS}
_FACTORIES[MEDIQ] = MediQEnv.from_row
_FACTORIES.update({name: FloDialEnv.from_row for name in FLODIAL_VARIANTS})
TASKS: tuple[str, ...] = tuple(_FACTORIES)

SOURCE_HELP = {
    MEDIQ: "a MediQ jsonl file (e.g. all_dev_good.jsonl) or its http(s) URL",
    **{name: "a folder of FloDial flowchart json files (knowledge-sources)" for name in FLODIAL_VARIANTS},
}


def check_env_options(task_name: str, options: dict[str, Any], prefix: str = "arew_agent.env_options") -> None:
    """At start-up: every option is one the task declares (or a user option, for tasks with a user) and valid."""
    if task_name not in _FACTORIES:
        raise KeyError(f"unknown task {task_name!r}; known: {', '.join(TASKS)}")
    env_class = _FACTORIES[task_name].__self__
    check_options(env_class, options, prefix, USER_OPTIONS if env_class.TAKES_USER_OPTIONS else ())
    if env_class.TAKES_USER_OPTIONS:
        user_options, _ = split_user_options(options)
        try:
            make_user(**user_options)
            make_user(**{**user_options, "user": "llm"})  # the LLM settings are checked even while the user is offline
        except (TypeError, ValueError) as error:
            raise ValueError(f"{prefix}.{error}") from None


def make_env(task_name: str, extra_info: dict[str, Any], seed: int, **options: Any) -> ActiveReasoningEnv:
    """Build the episode of one dataset row; ``options`` go to the task's constructor."""
    if task_name not in _FACTORIES:
        raise KeyError(f"unknown task {task_name!r}; known: {', '.join(TASKS)}")
    if extra_info.get("task", task_name) != task_name:
        raise ValueError(f"row belongs to task {extra_info['task']!r}, not {task_name!r}")
    return _FACTORIES[task_name](extra_info, seed, **options)


def prepare_task(
    task_name: str, out_dir: str | Path, n_train: int, n_val: int, n_test: int, seed: int, source: str | None = None
) -> dict[str, Path]:
    """Write the task's verl parquet splits; ``source`` is the raw data for tasks built from public files."""
    if task_name not in _FACTORIES:
        raise KeyError(f"unknown task {task_name!r}; known: {', '.join(TASKS)}")
    if task_name in VARIANTS:
        if source is not None:
            raise ValueError(f"task {task_name!r} is synthetic; it takes no --source")
        return write_preference_parquet(task_name, out_dir, n_train, n_val, n_test, seed)
    if source is None:
        raise ValueError(f"task {task_name!r} needs --source: {SOURCE_HELP[task_name]}")
    if task_name == MEDIQ:
        return write_mediq_parquet(source, out_dir, n_train, n_val, n_test, seed)
    return write_flodial_parquet(source, task_name, out_dir, n_train, n_val, n_test, seed)
