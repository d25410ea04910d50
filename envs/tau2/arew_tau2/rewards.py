"""The rewards of a tau2 episode (option ``reward``), computed on its live environment.

``official`` is tau2's reward: 0 unless the run ended with a stop (the agent's ``<answer>`` or
the customer's stop token); otherwise the product over the task's reward basis of ENV_ASSERTION
(every ``assert_*`` check holds on the final state), ACTION (every expected action matched by a
recorded call), DB (databases equal to a gold run of the expected actions) and COMMUNICATE
(tau2's own check). It equals ``tau2.evaluator.evaluator.evaluate_simulation(
env.simulation_run(), task, EvaluationType.ALL, solo_mode, "telecom")`` (tests check it on
random runs). ``fractional`` is 0 without a stop, else the mean over all the task's env
assertions met and all its expected actions matched (whatever the basis), so it is 1 only when
everything holds and below 1 whenever the official reward is 0. ``auto`` (default) takes the
row's ``reward`` field: :mod:`arew_tau2.tasks` writes ``fractional`` into train rows and
``official`` into validation and test rows.
"""

from __future__ import annotations

from typing import Any

from arew_tau2.runtime import CommunicateEvaluator, RewardType, Task, new_environment


class FinalState:
    """tau2's checks of an ended episode's environment, each computed once, when first needed
    (the DB check replays the expected actions on a fresh environment)."""

    def __init__(self, task: Task, env: Any):
        self.task = task
        self.env = env
        criteria = task.evaluation_criteria
        self._assertions = list(criteria.env_assertions or []) if criteria is not None else []
        self._expected = list(criteria.actions or []) if criteria is not None else []
        self._checks: list[bool] | None = None
        self._db_match: bool | None = None

    def checks(self) -> list[bool]:
        """The env assertions on the final state."""
        if self._checks is None:
            self._checks = [self.env.run_env_assertion(a, raise_assertion_error=False) for a in self._assertions]
        return self._checks

    def database_match(self) -> bool:
        """tau2's DB check: the final databases equal a gold run of the expected actions."""
        if self._db_match is None:
            gold = new_environment(self.task, solo=False)
            for action in self._expected:
                try:
                    gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
                except Exception:  # tau2 logs and goes on
                    pass
            self._db_match = gold.get_db_hash() == self.env.get_db_hash() and gold.get_user_db_hash() == self.env.get_user_db_hash()
        return self._db_match


def official_reward(final: FinalState, matched: list[bool], messages: list[Any]) -> float:
    """tau2's reward of an episode that ended with a stop; ``matched``: which expected actions a call matched."""
    criteria = final.task.evaluation_criteria
    if criteria is None:
        return 1.0
    basis = set(criteria.reward_basis)
    reward = 1.0
    if basis & {RewardType.DB, RewardType.ENV_ASSERTION} and not (criteria.actions is None and criteria.env_assertions is None):
        if RewardType.DB in basis:
            reward *= float(final.database_match())
        if RewardType.ENV_ASSERTION in basis:
            reward *= float(all(final.checks()))
    if RewardType.ACTION in basis:
        reward *= float(all(matched))
    if RewardType.COMMUNICATE in basis:
        reward *= CommunicateEvaluator.calculate_reward(task=final.task, full_trajectory=messages).reward
    if RewardType.NL_ASSERTION in basis:
        raise ValueError(f"task {final.task.id!r} is judged by natural-language assertions, which need an LLM judge")
    return float(reward)


def fractional_reward(final: FinalState, matched: list[bool], messages: list[Any]) -> float:
    """The share of checks met and expected actions matched of an episode that ended with a stop."""
    items = [*final.checks(), *matched]
    return float(sum(items) / len(items)) if items else official_reward(final, matched, messages)
