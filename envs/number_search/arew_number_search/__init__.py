"""Number search: an AReW task that lives in its own package and registers through an entry point."""

from arew.envs.registry import TaskSpec

TASK_SPECS = (
    TaskSpec(
        "number-search",
        env="arew_number_search.env:NumberSearchEnv",
        prepare="arew_number_search.data:prepare",
        description="find a secret number among 8 with 'at most k?' questions, 4 turns (synthetic; an example plugin)",
    ),
)
