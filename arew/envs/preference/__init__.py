"""Preference estimation (PE): infer a hidden attribute-weight vector from pairwise comparisons."""

from arew.envs.preference.env import PreferenceEnv
from arew.envs.preference.generator import VARIANTS, PEVariant
from arew.envs.preference.rules import ANSWER_WORDS
from arew.envs.registry import TaskSpec

TASK_SPECS = tuple(
    TaskSpec(
        name,
        env="arew.envs.preference.env:PreferenceEnv",
        prepare="arew.envs.preference.data:prepare",
        description=(
            f"preference estimation, {'PE-Gated' if v.reward_kind == 'binary' else 'PE-Full'}: "
            f"{v.subset_size} of {v.n_attrs} attributes, {v.max_turns} turns (synthetic)"
        ),
    )
    for name, v in VARIANTS.items()
)

__all__ = ["ANSWER_WORDS", "PEVariant", "PreferenceEnv", "TASK_SPECS", "VARIANTS"]
