"""MediQ: interactive clinical question answering with a simulated patient."""

from arew.envs.mediq.data import TASK
from arew.envs.mediq.env import MediQEnv
from arew.envs.registry import TaskSpec

TASK_SPECS = (
    TaskSpec(
        TASK,
        env="arew.envs.mediq.env:MediQEnv",
        prepare="arew.envs.mediq.data:prepare",
        description="4-option clinical diagnosis by questioning a simulated patient, 8 turns",
        source="required",
        source_help="a MediQ jsonl file (e.g. all_dev_good.jsonl) or its http(s) URL",
    ),
)

__all__ = ["MediQEnv", "TASK", "TASK_SPECS"]
