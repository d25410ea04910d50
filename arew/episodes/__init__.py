"""Playing one episode of an active-reasoning task, whatever generates the agent's turns (no verl)."""

from arew.episodes.driver import (
    ANSWER_NOW_NOTICE,
    OVERFLOW_POLICIES,
    EpisodeCritiques,
    EpisodeLog,
    Transcript,
    episode_name,
    episode_seed,
    play,
)
from arew.episodes.keys import action_text, decision_keys

__all__ = [
    "ANSWER_NOW_NOTICE",
    "OVERFLOW_POLICIES",
    "EpisodeCritiques",
    "EpisodeLog",
    "Transcript",
    "action_text",
    "decision_keys",
    "episode_name",
    "episode_seed",
    "play",
]
