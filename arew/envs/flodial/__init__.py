"""FloDial: flowchart-grounded troubleshooting with a simulated user (Easy and Hard variants)."""

from arew.envs.flodial.data import VARIANTS, FloDialVariant
from arew.envs.flodial.env import FloDialEnv
from arew.envs.registry import TaskSpec

TASK_SPECS = tuple(
    TaskSpec(
        name,
        env="arew.envs.flodial.env:FloDialEnv",
        prepare="arew.envs.flodial.data:prepare",
        description=(
            f"troubleshooting, 5 candidate faults separated by {v.min_separating}-{v.max_separating} "
            "table questions, 10 turns"
        ),
        source="required",
        source_help="a folder of FloDial flowchart json files (knowledge-sources)",
    )
    for name, v in VARIANTS.items()
)

__all__ = ["FloDialEnv", "FloDialVariant", "TASK_SPECS", "VARIANTS"]
