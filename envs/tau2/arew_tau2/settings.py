"""tau2 telecom's own episode options (``arew_agent.env_options``, declared in ``Tau2Env.OPTIONS``;
the customer's ``customer*`` options go to :mod:`arew_tau2.customer`) as one frozen value,
which holds their defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

REWARDS = ("auto", "official", "fractional")


@dataclass(frozen=True)
class Tau2Settings:
    """``reward``: which reward (:mod:`arew_tau2.rewards`); ``max_turns``: None for the mode's
    default; ``tool_output_chars``: the tool output shown to the agent is cut there; each
    ``critique_*`` switches one rule of :mod:`arew_tau2.critiques` on or off:

    - ``critique_invalid``: -1 for a malformed call, an unknown tool, bad argument names,
      ill-typed arguments (strict JSON types) or an invalid message;
    - ``critique_tool_error``: -1 for a call the tool rejected (``ToolMessage.error``);
    - ``critique_repeat``: -1 for a call repeated from the same state, or a message repeated
      without news;
    - ``critique_noop_write``: -1 for a WRITE tool call that changed nothing;
    - ``critique_unneeded_write``: -1 for a WRITE tool call that changed something and matches
      no expected action of the task, and for a message that led the customer to a write (one
      the message asked for) that matches no expected action, whatever else it brought: asking
      for repairs without diagnosing does not pay;
    - ``critique_undone_repair``: -1 for a WRITE that matches an expected action already matched
      and takes the databases back to a state of the episode before (toggling a repair back), and
      for a message that led the customer to one;
    - ``critique_expected_action``: +1 for a call that newly matches an expected action;
    - ``critique_information``: +1 for a reading of the phone new in the episode that bears on the
      task (:func:`~arew_tau2.critiques.diagnostic_reads`): the agent's own in solo control, one a
      message asked for in dual control; and for a message whose reply newly brings identity or a
      repair (a newly matched expected user-side action);
    - ``critique_unverified_end``: -1 for the decision that ends the episode (the agent's stop, or
      the message after which the customer ends the call) while the scenario's success reading has
      not shown success since the phone last changed.
    """

    reward: str = "auto"
    max_turns: int | None = None
    tool_output_chars: int = 2000
    critique_invalid: bool = True
    critique_tool_error: bool = True
    critique_repeat: bool = True
    critique_noop_write: bool = True
    critique_unneeded_write: bool = True
    critique_undone_repair: bool = True
    critique_expected_action: bool = True
    critique_information: bool = True
    critique_unverified_end: bool = True

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {list(REWARDS)}, got {self.reward!r}")

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[Tau2Settings, dict[str, Any]]:
        """(the settings among ``options``, the other options)."""
        names = {field.name for field in fields(cls)}
        mine = {key: value for key, value in options.items() if key in names}
        return cls(**mine), {key: value for key, value in options.items() if key not in names}
