"""MediQ: interactive clinical question answering with a simulated patient."""

from arew.envs.mediq.data import TASK
from arew.envs.mediq.env import MediQEnv

__all__ = ["MediQEnv", "TASK"]
