"""FloDial: flowchart-grounded troubleshooting with a simulated user (Easy and Hard variants)."""

from arew.envs.flodial.data import VARIANTS, FloDialVariant
from arew.envs.flodial.env import FloDialEnv

__all__ = ["FloDialEnv", "FloDialVariant", "VARIANTS"]
