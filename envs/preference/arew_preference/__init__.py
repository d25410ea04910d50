"""Preference estimation (PE): infer a hidden attribute-weight vector from pairwise comparisons."""

from arew.envs.registry import TaskSpec
from arew_preference.env import PreferenceEnv
from arew_preference.generator import VARIANTS, PEVariant
from arew_preference.rules import ANSWER_WORDS

TASK_SPECS = tuple(
    TaskSpec(
        name,
        env="arew_preference.env:PreferenceEnv",
        prepare="arew_preference.data:prepare",
        generate="arew_preference.data:generate",
        audit="arew_preference.audit:AUDITS",
        demonstrations="arew_preference.demonstrations:KnobPlayer" if v.subset_size == 2 else "",
        description=(
            f"preference estimation, {'PE-Gated' if v.reward_kind == 'binary' else 'PE-Full'}: "
            f"{v.subset_size} of {v.n_attrs} attributes, {v.max_turns} turns (synthetic)"
        ),
    )
    for name, v in VARIANTS.items()
)

__all__ = ["ANSWER_WORDS", "PEVariant", "PreferenceEnv", "TASK_SPECS", "VARIANTS"]
