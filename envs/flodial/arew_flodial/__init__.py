"""FloDial: flowchart-grounded troubleshooting with a simulated user (Easy and Hard variants)."""

from arew.envs.registry import TaskSpec
from arew_flodial.data import VARIANTS, FloDialVariant
from arew_flodial.env import FloDialEnv

TASK_SPECS = tuple(
    TaskSpec(
        name,
        env="arew_flodial.env:FloDialEnv",
        prepare="arew_flodial.data:prepare",
        audit="arew_flodial.audit:AUDITS",
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
