"""MediQ: interactive clinical question answering with a simulated patient."""

from envs.mediq.data import TASK
from envs.mediq.env import MediQEnv

__all__ = ["MediQEnv", "TASK"]
