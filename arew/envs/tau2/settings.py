"""tau2 telecom's own episode options (``arew_agent.env_options``, declared in ``Tau2Env.OPTIONS``;
the customer's ``customer*`` options go to :mod:`arew.envs.tau2.customer`) as one frozen value,
which holds their defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

REWARDS = ("auto", "official", "fractional")


@dataclass(frozen=True)
class Tau2Settings:
    """``reward``: which reward (:mod:`arew.envs.tau2.rewards`); ``max_turns``: None for the mode's
    default; ``tool_output_chars``: the tool output shown to the agent is cut there; each
    ``critique_*`` switches one rule of :mod:`arew.envs.tau2.critiques` on or off."""

    reward: str = "auto"
    max_turns: int | None = None
    tool_output_chars: int = 2000
    critique_invalid: bool = True
    critique_tool_error: bool = True
    critique_repeat: bool = True
    critique_noop_write: bool = True
    critique_expected_action: bool = True
    critique_information: bool = True

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {self.reward!r}")

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[Tau2Settings, dict[str, Any]]:
        """(the settings among ``options``, the other options)."""
        names = {field.name for field in fields(cls)}
        mine = {key: value for key, value in options.items() if key in names}
        return cls(**mine), {key: value for key, value in options.items() if key not in names}
