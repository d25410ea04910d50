"""The self-locking dashboard's panels, in the paper's order: one list for W&B and the offline report.

Each panel names the metric keys it plots (verl's ``file`` logger keys, exactly as the trainer
logs them; a ``*`` matches one path segment, for per-data-source validation keys) and says in
one line what to read from it. ``needs`` says when a run logs the panel's keys at all: ``always``
(every AReW run), ``pe`` (preference estimation: the Bayesian replay behind I_AS and the oracle
reward), ``choice`` (tasks with a gold option: MediQ, FloDial), ``lab`` (the CPU lab's own
measurements), ``grpo`` (several rollouts per prompt), ``adaptive`` (``algorithm.arew.adaptive``
on), ``synact_critiques`` (the MI critique source on), ``validation`` (a validation set) or
``ablation`` (runs that log a feedback ablation). The e2e test checks every key of the ``always``,
``pe``, ``grpo`` and ``validation`` panels against the metrics file of a real CPU training run (PE-G,
GRPO as+bt, with validation), so a renamed metric breaks a test first.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

CHANNEL_NAMES = {"as": "AS", "bt": "BT"}
NEEDS_WORDS = {
    "always": "every AReW run",
    "pe": "runs on preference-estimation tasks",
    "choice": "runs on tasks with a gold option",
    "lab": "the CPU lab (arew lab)",
    "grpo": "runs with several rollouts per prompt",
    "adaptive": "runs with adaptive strength on",
    "synact_critiques": "runs with MI critiques on",
    "validation": "runs with a validation set",
    "ablation": "a feedback ablation (arew eval --feedback-ablation)",
}
"""What each ``needs`` value means, in the words the docs and the offline report use."""
NEEDS = tuple(NEEDS_WORDS)


@dataclass(frozen=True)
class Panel:
    """One chart; ``healthy`` and ``locked`` say in a phrase what a healthy and a self-locked run show in it.

    ``shares``: the keys are counts of one whole (the +1 / 0 / -1 critiques of a step); the charts show
    each as its share of their sum, so runs with different batch sizes compare.
    """

    title: str
    keys: tuple[str, ...]
    description: str
    healthy: str
    locked: str
    needs: str = "always"
    shares: bool = False

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise ValueError(f"panel {self.title!r}: needs must be one of {NEEDS}, got {self.needs!r}")
        if not (self.healthy.strip() and self.locked.strip()):
            raise ValueError(f"panel {self.title!r}: say what a healthy and a self-locked run show (healthy=, locked=)")
        if self.shares and len(self.keys) < 2:
            raise ValueError(f"panel {self.title!r}: shares needs at least two count keys")

    @property
    def reading(self) -> str:
        return f"Healthy: {self.healthy}; self-locked: {self.locked}."


@dataclass(frozen=True)
class Section:
    name: str
    panels: tuple[Panel, ...]


def _per_channel(template: str) -> tuple[str, ...]:
    return tuple(template.format(ch=ch) for ch in CHANNEL_NAMES)


SECTIONS: tuple[Section, ...] = (
    Section(
        "Outcome reward",
        (
            Panel(
                "Training reward",
                ("critic/score/mean",),
                "Mean outcome reward of the step's episodes.",
                healthy="climbs and keeps climbing",
                locked="flattens early at what answering without asking earns",
            ),
            Panel(
                "Validation reward",
                ("val-core/arew/*/reward/mean@*",),  # data sources are arew/<task> (arew/envs/rows.py)
                "Mean outcome reward on the validation set, per data source.",
                healthy="follows the training reward",
                locked="stalls below it, or falls while the training reward holds",
                needs="validation",
            ),
        ),
    ),
    Section(
        "AS channel",
        (
            Panel(
                "AS proxy",
                ("episode/proxy_as_mean/mean",),
                "How informative the agent's actions are (the task's AS proxy, mean per episode): falls when it stops asking.",
                healthy="holds or rises as the agent learns which questions pay",
                locked="falls toward 0 and stays there: the agent stopped asking",
            ),
            Panel(
                "I_AS (nats)",
                ("episode/proxy_i_as_nats/mean",),
                "Information the actions gathered about the truth: log posterior-to-prior mass on it in the exact replay.",
                healthy="rises: the questions narrow the truth down",
                locked="falls toward 0: the questions no longer tell the answers apart",
                needs="pe",
            ),
            Panel(
                "AS critiques",
                ("arew/as/pos", "arew/as/zero", "arew/as/neg"),
                "Share of the step's action decisions critiqued +1, 0 and -1 (from the logged counts).",
                healthy="the +1 share grows, the -1 share shrinks",
                locked="the 0 and -1 shares take over: no informative question is asked",
                shares=True,
            ),
        ),
    ),
    Section(
        "BT channel",
        (
            Panel(
                "BT proxy",
                ("episode/proxy_bt_mean/mean",),
                "Mean belief progress per update round (the task's BT proxy): near 0 when updates ignore the answers.",
                healthy="clearly above 0: each update moves the belief toward the truth",
                locked="near 0: the updates ignore the answers",
            ),
            Panel(
                "C_BT",
                ("episode/proxy_c_bt/mean",),
                "Def. 3.2's belief-tracking capacity: the absorbed belief progress summed up to the final answer.",
                healthy="grows with training",
                locked="stays near 0 however well the agent asks",
            ),
            Panel(
                "Belief consistency",
                ("episode/proxy_final_equals_first_guess/mean",),
                "Share of episodes whose final answer is the first belief's judgment (Obs. 3: high means beliefs never moved).",
                healthy="falls: final answers move away from first guesses",
                locked="near 1: the final answer is the first guess",
                needs="choice",
            ),
            Panel(
                "BT follows the evidence",
                ("episode/proxy_bt_follow/mean",),
                "Sign agreement of belief steps with the latest answer (+1 follows it, 0 ignores it).",
                healthy="rises toward 1",
                locked="near 0: belief steps ignore the answers",
                needs="lab",
            ),
            Panel(
                "BT critiques",
                ("arew/bt/pos", "arew/bt/zero", "arew/bt/neg"),
                "Share of the step's belief updates critiqued +1, 0 and -1 (from the logged counts).",
                healthy="the +1 share grows",
                locked="the 0 share takes over: no update moves the belief",
                shares=True,
            ),
        ),
    ),
    Section(
        "Self-locking",
        (
            Panel(
                "AS proxy vs reward",
                ("selflock/corr_as_reward",),
                "Correlation over the step's episodes of the AS proxy with the reward the agent's own beliefs earn.",
                healthy="positive: asking well pays the agent",
                locked="near 0: asking no longer changes the agent's reward",
            ),
            Panel(
                "AS proxy vs reward, own and oracle (Obs. 2)",
                ("selflock/corr_as_reward", "selflock/corr_as_oracle"),
                "The same correlation under the agent's beliefs and under the rule-based oracle replaying its actions.",
                healthy="the two correlations close together",
                locked="the oracle's stays high while the agent's own sits near 0",
                needs="pe",
            ),
            Panel(
                "Correlation gap",
                ("selflock/corr_gap",),
                "Oracle correlation minus own correlation: informative asking that the agent's beliefs fail to cash in.",
                healthy="near 0",
                locked="clearly above 0 for good: informative asking that the beliefs do not use",
                needs="pe",
            ),
            Panel(
                "Oracle reward gap",
                ("selflock/oracle_reward_gap",),
                "Reward the rule-based tracker gets from the same actions, minus the agent's own reward.",
                healthy="shrinks toward 0",
                locked="stays large: the same questions would earn more with better updates",
                needs="pe",
            ),
            Panel(
                "Outcome-constant decisions",
                _per_channel("arew/synact/{ch}/outcome_constant_share"),
                "Share of decision points (same prompt, same state) where the action carries no information about the outcome.",
                healthy="falls as actions come to matter",
                locked="near 1: every action at a decision point ends the same way",
                needs="grpo",
            ),
            Panel(
                "Action-outcome MI (nats)",
                _per_channel("arew/synact/{ch}/mi"),
                "Mean mutual information between the action at a decision point and the outcome class (SynAct).",
                healthy="above 0: the choice of action changes the outcome",
                locked="near 0 everywhere",
                needs="grpo",
            ),
            Panel(
                "Feedback-ablation drop",
                ("eval/feedback_ablation_drop",),
                "Reward lost when the feedback is replaced (Obs. 3; `arew eval --feedback-ablation` writes it): near 0, the agent does not listen.",
                healthy="clearly above 0: replacing the feedback costs reward",
                locked="near 0: the agent does not listen",
                needs="ablation",
            ),
        ),
    ),
    Section(
        "Critiques",
        (
            Panel(
                "Both-signs share",
                ("arew/both_signs_frac",) + _per_channel("arew/{ch}/both_signs_frac"),
                "Share of trajectories with both a +1 and a -1 critique: only those are reweighted.",
                healthy="well above 0 while critiques still disagree within episodes",
                locked="near 0: nothing left to reweight",
            ),
            Panel(
                "|lambda u| mass",
                ("arew/abs_coef_per_token", "arew/abs_coef_per_traj"),
                "Size of the critique term per policy token and per trajectory.",
                healthy="moderate and steady",
                locked="0 (no mixed trajectories left) or swamping the outcome advantage",
            ),
            Panel(
                "Positive/negative token ratio",
                ("arew/pos_neg_token_ratio",),
                "Policy tokens under +1 critiques over those under -1 (critique chasing shows as a climb).",
                healthy="moves slowly",
                locked="climbs steeply: the policy chases +1 critiques",
            ),
            Panel(
                "Schedule factor",
                ("arew/strength_factor",),
                "The critique strength schedule's multiplier this step (warm-up, start and end steps).",
                healthy="follows the configured schedule",
                locked="not a health signal: check that it matches the configuration",
            ),
            Panel(
                "Critique accuracy",
                _per_channel("arew/{ch}/accuracy"),
                "Online estimate of each channel's critique accuracy against the decisions' advantages (PPO: each decision's own GAE increment; 0.5 is chance, Prop. 4.1).",
                healthy="above 0.5",
                locked="at or below 0.5: the critiques and the advantages disagree",
            ),
            Panel(
                "Adaptive strength",
                _per_channel("arew/{ch}/adaptive_factor"),
                "Multiplier of each channel's lambda under adaptive strength.",
                healthy="near 1 while the critiques agree with the advantages",
                locked="falling toward 0: the critiques are being switched off",
                needs="adaptive",
            ),
            Panel(
                "MI critiques",
                _per_channel("arew/synact/{ch}/critique_pos") + _per_channel("arew/synact/{ch}/critique_neg"),
                "Critiques the repeated-rollout (SynAct) source gave this step.",
                healthy="both signs given while actions still matter",
                locked="none given: every decision point is outcome-constant",
                needs="synact_critiques",
            ),
        ),
    ),
    Section(
        "Off-policy",
        (
            Panel(
                "Staleness",
                (
                    "training/off_policy/trajectory_staleness/mean",
                    "arew/off_policy/decision_staleness/mean",
                    "arew/off_policy/spanning_decision_share",
                ),
                "Weight versions the trained samples lag behind the policy: verl's per trajectory (its newest version), AReW's per decision; and the share of decisions cut by a weight sync and resumed (asynchronous trainers).",
                healthy="0 under the sync trainer; under colocate_async at most about 1 and steady",
                locked="not a self-locking signal: staleness that grows means the rollout runs ahead of training (bound it with trainer.v1.sampler.max_off_policy_threshold)",
            ),
        ),
    ),
)

ROLLOUT_TABLES = ("rollouts/train", "rollouts/val")
"""W&B Table keys of the sampled rollouts (the dashboard's last section)."""


def panels(needs: Iterable[str] | None = None) -> list[Panel]:
    """Every panel in order, or those whose ``needs`` is among ``needs``."""
    wanted = None if needs is None else set(needs)
    return [p for s in SECTIONS for p in s.panels if wanted is None or p.needs in wanted]


def matching(pattern: str, keys: Iterable[str]) -> list[str]:
    """The logged keys a panel key stands for (itself, or every match of a ``*`` pattern), sorted."""
    if "*" not in pattern:
        return [pattern] if pattern in set(keys) else []
    segments = pattern.count("/")
    return sorted(k for k in keys if k.count("/") == segments and fnmatch.fnmatchcase(k, pattern))


def missing_keys(logged: Iterable[str], needs: Iterable[str] = ("always",)) -> list[str]:
    """Panel keys of the given ``needs`` that no logged key matches."""
    logged = set(logged)
    return [key for panel in panels(needs) for key in panel.keys if not matching(key, logged)]
