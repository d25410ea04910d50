"""Number search: an AReW task in a package of its own, registered through the arew.tasks entry point.

Written by ``arew new-task number-search``: a working task to rewrite into your own (docs/guides/writing-an-environment.md).
"""

from arew.envs.registry import TaskSpec

TASK_SPECS = (
    TaskSpec(
        "number-search",
        env="arew_number_search.env:NumberSearchEnv",
        prepare="arew_number_search.data:prepare",
        description="find a secret number among 8 with 'at most k?' questions, 4 turns (synthetic)",
    ),
)
