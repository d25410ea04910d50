"""Batched episodes of the lab agent against the project's real PE environment, through text.

Each episode follows the loop of :mod:`arew.envs.base`: ``max_turns`` action rounds, each
followed by an update round, then the final ``<answer>`` restating the last belief. The
answer is not a policy decision (the environment gives it critique 0 when it follows an
update round, and it carries no new information), so an episode has 2H decisions, one
"token" each: position 2t is action t (channel "as"), 2t+1 the update after it ("bt").
Everything the trainer needs about the agent's choices is kept as tensors, so the PPO
epochs recompute log-probabilities without replaying the environment.

The loop is the lab's own, not :func:`arew.episodes.play`: it steps every episode of the batch
in lockstep so that its policy scores one tensor batch per round. Its SynAct keys are the
trainer's (:mod:`arew.episodes.keys`, hashed from the texts sent and the replies got), so the lab
measures exactly what training measures.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
import torch

from arew.core import Segments, collect_segments, make_record
from arew.core.records import CHANNELS
from arew.core.synact import DecisionKeys
from arew.envs.registry import make_env
from arew.episodes import EpisodeLog, decision_keys
from arew.lab.agent import Critic, History, LabPolicy, QuerySpace, sample

# the simulated user's three answers in preference estimation, as the lab's agent reads them
ANSWER_SIGNS = {"Yes": 1, "No": -1, "Equal": 0}
DIAGNOSTICS = ("i_as_nats", "oracle_reward", "c_bt", "final_equals_first_guess", "n_informative")
"""Scalars of ``env.proxies()`` (the Bayesian replay included) averaged in diagnosed rollouts (``diagnostics``)."""


@dataclass
class Rollout:
    """One batch of finished episodes; (B, 2H) tensors interleave AS and BT decisions."""

    pair_features: torch.Tensor  # (B, H, P, F_pair)
    pair_actions: torch.Tensor  # (B, H) item pair
    subset_features: torch.Tensor  # (B, H, C, F_as) the chosen pair's attribute sets
    subset_actions: torch.Tensor  # (B, H) attribute set
    bt_features: torch.Tensor  # (B, H, D, F_bt)
    bt_actions: torch.Tensor  # (B, H, D) step bin per attribute
    value_features: torch.Tensor  # (B, 2H, F_v)
    old_log_probs: torch.Tensor  # (B, 2H)
    values: torch.Tensor | None  # (B, 2H) critic values, PPO only
    labels: torch.Tensor  # (B, 2H) environment critiques in {-1, 0, 1}
    valid: torch.Tensor  # (B, 2H) the environment accepted the text
    reward: torch.Tensor  # (B,) outcome reward
    as_proxy: torch.Tensor  # (B, H) 1 iff the query was new and informative
    bt_proxy: torch.Tensor  # (B, H) cos(w_t, w*) - cos(w_prev, w*)
    task_index: torch.Tensor  # (B,) which task each episode solved (GRPO groups)
    texts: list[list[str]]  # every text sent to the environment, per episode, answer last
    diagnostics: dict[str, float]
    replies: list[list[str]] = field(default_factory=list)  # the environment's message after each decision
    state_keys: torch.Tensor | None = None  # (B, 2H) SynAct state key of each decision (arew.episodes.keys); None: not kept
    action_keys: torch.Tensor | None = None  # (B, 2H) its action key
    proxies: list[dict] = field(default_factory=list)  # env.proxies() of each episode when diagnosed, else empty

    @property
    def n_decisions(self) -> int:
        return self.labels.shape[1]

    def records(self) -> list[dict]:
        """Per-episode critique records in the contract of :mod:`arew.core.records`."""
        spans = [(p, p + 1) for p in range(self.n_decisions)]
        channels = [CHANNELS[p % 2] for p in range(self.n_decisions)]
        return [make_record(spans, channels, row) for row in self.labels.tolist()]

    def segments(self) -> Segments:
        return collect_segments(self.records(), torch.full((len(self.labels),), self.n_decisions))

    def decision_keys(self) -> DecisionKeys | None:
        """The keys in :meth:`segments`' order (episode, then position), or None when the rollout kept none."""
        if self.state_keys is None or self.action_keys is None:
            return None
        state, action = self.state_keys.reshape(-1).numpy(), self.action_keys.reshape(-1).numpy()
        return DecisionKeys(state, action, np.ones(len(state), dtype=bool))


def _keys(texts: list[list[str]], replies: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 2H) state and action keys, hashed from the texts and replies as the trainer hashes its episodes'."""
    keys = [
        decision_keys(EpisodeLog(channels=[CHANNELS[p % 2] for p in range(len(got))], texts=sent[: len(got)], replies=list(got)))
        for sent, got in zip(texts, replies)
    ]
    return tuple(torch.tensor([k[name] for k in keys], dtype=torch.long) for name in ("state", "action"))


def _chosen(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)


async def _act_all(envs: list, texts: list[str]) -> list:
    return await asyncio.gather(*(env.act(text) for env, text in zip(envs, texts)))


def _interleave(as_part: list[torch.Tensor], bt_part: list[torch.Tensor]) -> torch.Tensor:
    """(B, 2H, ...) from H per-turn AS tensors and H per-turn BT tensors."""
    return torch.stack([x for pair in zip(as_part, bt_part) for x in pair], 1)


@torch.no_grad()
def rollout(
    policy: LabPolicy,
    critic: Critic | None,
    space: QuerySpace,
    task_name: str,
    rows: list[dict],
    task_index: np.ndarray,
    generator: torch.Generator,
    replay_samples: int,
    diagnose: bool = False,
) -> Rollout:
    """Play one episode per row; ``diagnose`` also keeps each episode's ``env.proxies()`` and averages :data:`DIAGNOSTICS` of them.

    The Bayesian replay behind those diagnostics is the environment's most expensive part (about
    0.8 ms an episode). It draws its candidates from its own generator, seeded by the episode's
    seed, and changes no state: a diagnosed rollout trains exactly as one without.
    """
    envs = [make_env(task_name, row, int(row["seed"]), replay_samples=replay_samples) for row in rows]
    history = History(space, torch.tensor([row["items"] for row in rows], dtype=torch.float32))
    batch = len(rows)
    texts: list[list[str]] = [[] for _ in rows]
    replies: list[list[str]] = [[] for _ in rows]
    keep: dict[str, list[torch.Tensor]] = {
        k: []
        for k in ("pair_f", "pair_a", "sub_f", "sub_a", "as_lp", "bt_f", "bt_a", "bt_lp")
        + ("v_as", "v_bt", "z_as", "z_bt", "ok_as", "ok_bt", "p_as", "p_bt")
    }
    rows_index = torch.arange(batch)
    loop = asyncio.new_event_loop()
    try:
        for turn in range(space.max_turns):
            queries = history.query_features(turn)
            pair_features = history.pair_features(queries)
            pair_logits = policy.pair_logits(pair_features)
            pair = sample(pair_logits, generator)
            subset_features = queries[rows_index, pair]
            subset_logits = policy.subset_logits(subset_features)
            subset = sample(subset_logits, generator)
            query = pair * queries.shape[2] + subset
            keep["pair_f"].append(pair_features)
            keep["pair_a"].append(pair)
            keep["sub_f"].append(subset_features)
            keep["sub_a"].append(subset)
            keep["as_lp"].append(_chosen(pair_logits, pair) + _chosen(subset_logits, subset))
            keep["v_as"].append(history.value_features(turn, 0))
            sent = [space.query_text(int(q)) for q in query]
            steps = loop.run_until_complete(_act_all(envs, sent))
            for episode, step in enumerate(steps):
                replies[episode].append(step.feedback)
            if not all(step.valid for step in steps):
                bad = next(step for step in steps if not step.valid)
                raise RuntimeError(f"the environment rejected a lab query: {bad.feedback}")
            answer = torch.tensor([ANSWER_SIGNS[step.info["user_answer"]] for step in steps])
            informative = torch.tensor([step.info["as_proxy"] for step in steps], dtype=torch.float32)
            keep["z_as"].append(torch.tensor([step.critique for step in steps]))
            keep["ok_as"].append(torch.ones(batch, dtype=torch.bool))
            keep["p_as"].append(informative)
            history.record_query(query, answer, informative)

            features = history.bt_features(turn)
            logits = policy.bt_logits(features)
            move = sample(logits, generator)
            keep["bt_f"].append(features)
            keep["bt_a"].append(move)
            keep["bt_lp"].append(_chosen(logits, move).sum(-1))
            keep["v_bt"].append(history.value_features(turn, 1))
            units = (history.units + policy.step_bins[move]).clamp(0, space.belief_units)
            guesses = [space.belief_text(u, final=False) for u in units.numpy()]
            steps = [env.update(text) for env, text in zip(envs, guesses)]
            for episode, step in enumerate(steps):
                replies[episode].append(step.feedback)
            ok = torch.tensor([step.valid for step in steps])
            history.units = torch.where(ok[:, None], units, history.units)
            keep["z_bt"].append(torch.tensor([step.critique for step in steps]))
            keep["ok_bt"].append(ok)
            keep["p_bt"].append(torch.tensor([step.info["bt_proxy"] for step in steps], dtype=torch.float32))
            for episode, (question, guess) in enumerate(zip(sent, guesses)):
                texts[episode] += [question, guess]
    finally:
        loop.close()
    for episode, (env, units) in enumerate(zip(envs, history.units.numpy())):
        final = space.belief_text(units, final=True)
        env.answer(final)
        texts[episode].append(final)

    value_features = _interleave(keep["v_as"], keep["v_bt"])
    state_keys, action_keys = _keys(texts, replies)
    proxies = [env.proxies() for env in envs] if diagnose else []
    diagnostics = {key: float(np.mean([p[key] for p in proxies])) for key in DIAGNOSTICS} if diagnose else {}
    return Rollout(
        pair_features=torch.stack(keep["pair_f"], 1),
        pair_actions=torch.stack(keep["pair_a"], 1),
        subset_features=torch.stack(keep["sub_f"], 1),
        subset_actions=torch.stack(keep["sub_a"], 1),
        bt_features=torch.stack(keep["bt_f"], 1),
        bt_actions=torch.stack(keep["bt_a"], 1),
        value_features=value_features,
        old_log_probs=_interleave(keep["as_lp"], keep["bt_lp"]),
        values=None if critic is None else critic(value_features),
        labels=_interleave(keep["z_as"], keep["z_bt"]),
        valid=_interleave(keep["ok_as"], keep["ok_bt"]),
        reward=torch.tensor([env.reward() for env in envs], dtype=torch.float32),
        as_proxy=torch.stack(keep["p_as"], 1),
        bt_proxy=torch.stack(keep["p_bt"], 1),
        task_index=torch.as_tensor(task_index, dtype=torch.long),
        texts=texts,
        diagnostics=diagnostics,
        replies=replies,
        state_keys=state_keys,
        action_keys=action_keys,
        proxies=proxies,
    )
