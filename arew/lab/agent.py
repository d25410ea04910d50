"""The small neural agent that stands in for the LLM: query space, history encoding, heads.

The agent never sees w*. What it sees of the history is encoded per decision:

- action selection (AS) writes its query the way text is written, left to right: first the
  item pair, then (in PE-G) the attribute set given the pair, so log pi(query) = log
  pi(pair) + log pi(attributes | pair). Each possible attribute set of the chosen pair is
  scored from its own features: the item-score differences on those attributes (largest
  times smallest, negative exactly for a trade-off; the absolute total, how "obvious" the
  comparison is; the spread), whether this query was asked before, how often its
  attributes were queried, how sure the current belief is about its answer, and the turn.
  Each pair is scored from the mean of those features over its attribute sets plus the
  share of its attribute sets that are trade-offs;
- belief tracking (BT) moves each attribute's weight by one of a few discrete steps, from
  that attribute's features: the latest answer times the latest difference on it (the
  evidence), whether it was queried, the current weight, the accumulated evidence, whether
  the latest query was a trade-off, and the turn.

The heads share nothing, so AS and BT are coupled only through the outcome reward and the
history, as in the paper's section 3. Features never depend on the item order or on which
item of a pair is written first, so one small network serves every task of a variant.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import nn

AS_FEATURES = ("tradeoff", "salience", "spread", "repeat", "attr_queries", "belief_margin", "turn")
PAIR_FEATURES = (*AS_FEATURES, "tradeoff_share")
BT_FEATURES = ("evidence", "queried", "weight", "evidence_sum", "tradeoff", "turn")
DIFF_SCALE = 4.0  # scores are 1..5, so differences lie in [-4, 4]


@dataclass(frozen=True)
class QuerySpace:
    """Every query a PE task allows, and the text the environment parses for each choice."""

    n_items: int
    n_attrs: int
    subset_size: int
    max_turns: int
    belief_units: int  # beliefs live on the grid k / belief_units, k = 0..belief_units

    @cached_property
    def pairs(self) -> np.ndarray:
        return np.array(list(itertools.combinations(range(self.n_items), 2)))

    @cached_property
    def subsets(self) -> np.ndarray:
        return np.array(list(itertools.combinations(range(self.n_attrs), self.subset_size)))

    @property
    def n_queries(self) -> int:
        return len(self.pairs) * len(self.subsets)

    @property
    def gated(self) -> bool:
        return self.subset_size < self.n_attrs

    @cached_property
    def subset_masks(self) -> torch.Tensor:
        """(n_queries, D) 1 on the attributes each query compares."""
        masks = torch.zeros(len(self.subsets), self.n_attrs)
        masks.scatter_(1, torch.as_tensor(self.subsets), 1.0)
        return masks.repeat(len(self.pairs), 1)

    def query_differences(self, items: torch.Tensor) -> torch.Tensor:
        """(B, n_queries, D): first item minus second item on each query's attributes, 0 elsewhere."""
        pairs = torch.as_tensor(self.pairs)
        diff = items[:, pairs[:, 0]] - items[:, pairs[:, 1]]  # (B, P, D)
        return diff.repeat_interleave(len(self.subsets), dim=1) * self.subset_masks

    def query_text(self, query: int) -> str:
        """The action-round text for query index ``query`` (1-based numbers, as the prompt shows)."""
        first, second = self.pairs[query // len(self.subsets)] + 1
        if not self.gated:
            return f"<interact>{first}, {second}</interact>"
        attrs = ", ".join(str(k + 1) for k in self.subsets[query % len(self.subsets)])
        return f"<interact>{first}, {second} | {attrs}</interact>"

    def belief_text(self, units: np.ndarray, final: bool) -> str:
        """Update-round (or final ``<answer>``) text for a belief given in grid units."""
        tag = "answer" if final else "interact"
        numbers = ", ".join(f"{u / self.belief_units:.2f}" for u in units)
        return f"<{tag}>{numbers}</{tag}>"


class History:
    """What the agent has seen in a batch of episodes, as tensors; updated after each round."""

    def __init__(self, space: QuerySpace, items: torch.Tensor):
        batch = items.shape[0]
        self.space = space
        self.diffs = space.query_differences(items)  # (B, K, D)
        mask = space.subset_masks.bool()
        high = self.diffs.masked_fill(~mask, -torch.inf).amax(-1)
        low = self.diffs.masked_fill(~mask, torch.inf).amin(-1)
        self.static = torch.stack(
            [high * low / DIFF_SCALE**2, self.diffs.sum(-1).abs() / DIFF_SCALE, (high - low) / DIFF_SCALE], -1
        )
        self.units = torch.full((batch, space.n_attrs), space.belief_units // 2, dtype=torch.long)
        self.asked = torch.zeros(batch, space.n_queries)
        self.attr_queries = torch.zeros(batch, space.n_attrs)
        self.evidence = torch.zeros(batch, space.n_attrs)
        self.evidence_sum = torch.zeros(batch, space.n_attrs)
        self.queried = torch.zeros(batch, space.n_attrs)
        self.tradeoff = torch.zeros(batch)
        self.n_informative = torch.zeros(batch)

    @property
    def belief(self) -> torch.Tensor:
        return self.units.float() / self.space.belief_units

    def query_features(self, turn: int) -> torch.Tensor:
        """(B, P, C, len(AS_FEATURES)) features of every query (pair P x attribute set C) before action ``turn``."""
        attr_queries = (self.attr_queries[:, None, :] * self.space.subset_masks).sum(-1) / (
            self.space.subset_size * self.space.max_turns
        )
        margin = (self.diffs @ self.belief[:, :, None]).squeeze(-1).abs() / DIFF_SCALE
        turn_col = torch.full_like(margin, turn / self.space.max_turns)
        features = torch.cat([self.static, torch.stack([self.asked, attr_queries, margin, turn_col], -1)], -1)
        return features.view(len(features), len(self.space.pairs), len(self.space.subsets), len(AS_FEATURES))

    @staticmethod
    def pair_features(query_features: torch.Tensor) -> torch.Tensor:
        """(B, P, len(PAIR_FEATURES)): each pair's query features averaged over its attribute sets."""
        share = (query_features[..., AS_FEATURES.index("tradeoff")] < 0).float().mean(-1, keepdim=True)
        return torch.cat([query_features.mean(-2), share], -1)

    def record_query(self, query: torch.Tensor, answer: torch.Tensor, informative: torch.Tensor) -> None:
        """Fold action ``query`` (B,) and the user's answer sign (B,) into the history."""
        rows = torch.arange(len(query))
        diff = self.diffs[rows, query]
        self.asked[rows, query] = 1.0
        self.queried = self.space.subset_masks[query]
        self.attr_queries += self.queried
        self.evidence = answer[:, None].float() * diff / DIFF_SCALE
        self.evidence_sum += self.evidence
        self.tradeoff = (self.static[rows, query, 0] < 0).float()
        self.n_informative += informative.float()

    def bt_features(self, turn: int) -> torch.Tensor:
        """(B, D, len(BT_FEATURES)) per-attribute features for the update after action ``turn``."""
        batch, d = self.units.shape
        return torch.stack(
            [
                self.evidence,
                self.queried,
                self.belief - 0.5,
                self.evidence_sum / self.space.max_turns,
                self.tradeoff[:, None].expand(batch, d),
                torch.full((batch, d), turn / self.space.max_turns),
            ],
            -1,
        )

    def value_features(self, turn: int, channel: int) -> torch.Tensor:
        """(B, 3 + 2D) the critic's view before decision (turn, channel): channel 0 AS, 1 BT."""
        batch = self.units.shape[0]
        scalars = torch.tensor([channel, turn / self.space.max_turns]).expand(batch, 2)
        return torch.cat(
            [scalars, (self.n_informative / self.space.max_turns)[:, None], self.belief - 0.5, self.evidence_sum / 2],
            -1,
        )


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    net = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, outputs))
    nn.init.zeros_(net[2].weight)
    nn.init.zeros_(net[2].bias)
    return net


class _Scorer(nn.Module):
    """Logit per candidate: an MLP (starting at zero) plus a linear prior on the same features."""

    def __init__(self, features: tuple[str, ...], hidden: int, prior: dict[str, float]):
        super().__init__()
        self.net = _mlp(len(features), hidden, 1)
        self.prior = nn.Linear(len(features), 1, bias=False)
        with torch.no_grad():
            self.prior.weight.zero_()
            for name, weight in prior.items():
                self.prior.weight[0, features.index(name)] = weight

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return (self.net(features) + self.prior(features)).squeeze(-1)


class LabPolicy(nn.Module):
    """AS heads (pair, then attribute set) and BT head (a step distribution per attribute).

    Output layers start at zero, so the initial policy is exactly the configured prior:
    AS logits = ``salience_init`` x salience at both stages (obvious comparisons preferred),
    and BT steps drawn from ``bt_init_probs`` whatever the feedback (belief tracking that
    ignores the evidence).
    """

    def __init__(self, hidden: int, step_bins: tuple[int, ...], bt_init_probs: tuple[float, ...], salience_init: float):
        super().__init__()
        self.pair_head = _Scorer(PAIR_FEATURES, hidden, {"salience": salience_init})
        self.subset_head = _Scorer(AS_FEATURES, hidden, {"salience": salience_init})
        self.bt_net = _mlp(len(BT_FEATURES), hidden, len(step_bins))
        with torch.no_grad():
            self.bt_net[2].bias.copy_(torch.log(torch.tensor(bt_init_probs)))
        self.register_buffer("step_bins", torch.tensor(step_bins, dtype=torch.long))

    def pair_logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.pair_head(features)

    def subset_logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.subset_head(features)

    def bt_logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.bt_net(features)

    def log_probs(self, ro) -> torch.Tensor:
        """(B, 2H) log-probability of each decision of rollout ``ro``, AS of turn t at 2t, BT at 2t+1.

        A decision's log-probability is the sum over its parts (pair and attribute set; the
        attributes' steps): the aggregate log-probability of the segment, as in Eq. 1.
        """

        def chosen(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
            return torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)

        as_lp = chosen(self.pair_logits(ro.pair_features), ro.pair_actions) + chosen(
            self.subset_logits(ro.subset_features), ro.subset_actions
        )
        bt_lp = chosen(self.bt_logits(ro.bt_features), ro.bt_actions).sum(-1)
        return torch.stack([as_lp, bt_lp], -1).flatten(1)


class Critic(nn.Module):
    """PPO's value head over :meth:`History.value_features`."""

    def __init__(self, n_attrs: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3 + 2 * n_attrs, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)


def sample(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One categorical draw per row of ``logits`` (Gumbel-max, so a seeded generator fixes it)."""
    uniform = torch.rand(logits.shape, generator=generator).clamp_(1e-12, 1.0 - 1e-7)
    return (logits - torch.log(-torch.log(uniform))).argmax(-1)
