"""The method's core: critique records, coefficients, transforms, schedule, statistics.

Pure torch; nothing here imports verl, so it can be read, tested and reused in isolation.
"""

from arew.core.config import AReWConfig, AReWConfigError, parse_config
from arew.core.credit import CreditResult, gigpo_advantages, turn_gae_advantages, turn_grpo_advantages
from arew.core.quality import QualityTracker
from arew.core.records import RECORDS_KEY, CritiqueRecordError, Segments, collect_segments, make_record
from arew.core.reweight import CritiqueInjection, add_intermediate_rewards, reweight, reweight_advantages, shape_rewards

__all__ = [
    "RECORDS_KEY",
    "AReWConfig",
    "AReWConfigError",
    "CreditResult",
    "CritiqueInjection",
    "CritiqueRecordError",
    "QualityTracker",
    "Segments",
    "add_intermediate_rewards",
    "collect_segments",
    "gigpo_advantages",
    "make_record",
    "parse_config",
    "reweight",
    "reweight_advantages",
    "shape_rewards",
    "turn_gae_advantages",
    "turn_grpo_advantages",
]
