"""MediQ: interactive clinical question answering with a simulated patient."""

from arew.envs.registry import TaskSpec
from arew_mediq.data import TASK
from arew_mediq.env import MediQEnv

TASK_SPECS = (
    TaskSpec(
        TASK,
        env="arew_mediq.env:MediQEnv",
        prepare="arew_mediq.data:prepare",
        audit="arew_mediq.audit:AUDITS",
        description="4-option clinical diagnosis by questioning a simulated patient, 8 turns",
        source="required",
        source_help="a MediQ jsonl file (e.g. all_dev_good.jsonl) or its http(s) URL",
    ),
)

__all__ = ["MediQEnv", "TASK", "TASK_SPECS"]
