"""Preference estimation (PE): infer a hidden attribute-weight vector from pairwise comparisons."""

from arew.envs.preference.env import PreferenceEnv
from arew.envs.preference.generator import VARIANTS, PEVariant

__all__ = ["PEVariant", "PreferenceEnv", "VARIANTS"]
