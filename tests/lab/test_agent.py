"""The lab agent's text, features and heads, checked against the project's own PE parser and rules."""

import numpy as np
import pytest
import torch

from arew.envs import parsing
from arew.lab.agent import AS_FEATURES, BT_FEATURES, History, LabPolicy, QuerySpace, sample
from arew.lab.config import LabConfig
from arew_preference.generator import VARIANTS, generate_splits
from arew_preference.rules import is_informative, masked_differences


def space_for(task: str) -> QuerySpace:
    spec = VARIANTS[task]
    return QuerySpace(10, spec.n_attrs, spec.subset_size, spec.max_turns, belief_units=20)


def rows_for(task: str, n: int = 3) -> list[dict]:
    return generate_splits(VARIANTS[task], {"train": n}, seed=5)["train"]


@pytest.mark.parametrize("task", ["pe-g-s2", "pe-g-s3", "pe-f-d6"])
def test_every_query_text_parses_to_its_own_pair_and_attributes(task):
    space = space_for(task)
    n_subsets = len(space.subsets)
    seen = set()
    for q in range(space.n_queries):
        payload = parsing.extract_payload(space.query_text(q), "interact")
        parsed = parsing.parse_pair_query(payload.value, space.n_items, space.n_attrs, space.subset_size)
        assert parsed.ok, (q, space.query_text(q), parsed.error)
        pair = tuple(space.pairs[q // n_subsets])
        assert (parsed.value.first, parsed.value.second) == pair
        assert parsed.value.attrs == tuple(space.subsets[q % n_subsets])
        seen.add(parsed.value.key)
    assert len(seen) == space.n_queries == 45 * len(space.subsets)


def test_belief_text_is_a_valid_guess_or_answer_with_the_grid_values():
    space = space_for("pe-g-s2")
    units = np.array([0, 1, 10, 13, 19, 20])
    for final, tag in ((False, "interact"), (True, "answer")):
        text = space.belief_text(units, final=final)
        assert parsing.payload_kind(text) == tag
        values = parsing.parse_vector(parsing.extract_payload(text, tag).value, 6)
        assert values.ok and np.allclose(values.value, units / 20)


@pytest.mark.parametrize("task", ["pe-g-s2", "pe-g-s3"])
def test_query_differences_and_tradeoff_feature_match_the_environment_rules(task):
    space = space_for(task)
    rows = rows_for(task)
    items = torch.tensor([r["items"] for r in rows], dtype=torch.float32)
    history = History(space, items)
    features = history.query_features(0).flatten(1, 2)
    n_subsets = len(space.subsets)
    queries = [
        parsing.PairQuery(
            int(space.pairs[q // n_subsets][0]),
            int(space.pairs[q // n_subsets][1]),
            tuple(space.subsets[q % n_subsets]),
        )
        for q in range(space.n_queries)
    ]
    for b, row in enumerate(rows):
        diffs = masked_differences(np.asarray(row["items"], dtype=float), queries)
        assert np.allclose(history.diffs[b].numpy(), diffs)
        tradeoff = features[b, :, AS_FEATURES.index("tradeoff")].numpy() < 0
        assert (tradeoff == is_informative(diffs)).all()
        assert 0 < tradeoff.mean() < 1


def test_pair_features_average_the_query_features_and_count_tradeoffs():
    space = space_for("pe-g-s2")
    history = History(space, torch.tensor([r["items"] for r in rows_for("pe-g-s2", 2)], dtype=torch.float32))
    queries = history.query_features(3)
    pairs = History.pair_features(queries)
    assert pairs.shape == (2, 45, len(AS_FEATURES) + 1)
    assert torch.allclose(pairs[..., : len(AS_FEATURES)], queries.mean(2))
    share = (queries[..., AS_FEATURES.index("tradeoff")] < 0).float().mean(-1)
    assert torch.allclose(pairs[..., -1], share)


def test_record_query_marks_the_repeat_and_signed_evidence():
    space = space_for("pe-g-s2")
    history = History(space, torch.tensor([r["items"] for r in rows_for("pe-g-s2", 2)], dtype=torch.float32))
    query = torch.tensor([7, 300])
    answer = torch.tensor([1, -1])
    history.record_query(query, answer, informative=torch.tensor([1.0, 0.0]))
    repeat = history.query_features(1).flatten(1, 2)[..., AS_FEATURES.index("repeat")]
    assert repeat.sum().item() == 2 and repeat[0, 7] == 1 and repeat[1, 300] == 1
    expected = answer[:, None] * history.diffs[torch.arange(2), query] / 4
    bt = history.bt_features(1)
    assert torch.equal(bt[..., BT_FEATURES.index("evidence")], expected)
    assert torch.equal(bt[..., BT_FEATURES.index("queried")], space.subset_masks[query])


def test_initial_policy_is_the_configured_prior():
    config = LabConfig()
    policy = LabPolicy(8, config.step_bins, config.bt_init_probs, salience_init=3.0)
    # BT ignores the evidence: the same step distribution whatever the features
    features = torch.randn(5, 6, len(BT_FEATURES))
    probs = torch.softmax(policy.bt_logits(features), -1)
    assert torch.allclose(probs, torch.tensor(config.bt_init_probs).expand_as(probs), atol=1e-6)
    # AS prefers the more salient (obvious) comparison, nothing else
    candidates = torch.zeros(2, len(AS_FEATURES))
    candidates[1, AS_FEATURES.index("salience")] = 1.0
    candidates[:, AS_FEATURES.index("tradeoff")] = torch.tensor([-1.0, 1.0])
    logits = policy.subset_logits(candidates)
    assert float((logits[1] - logits[0]).detach()) == pytest.approx(3.0)


def test_sample_is_seeded_and_follows_the_softmax():
    logits = torch.log(torch.tensor([0.1, 0.6, 0.3])).expand(20000, 3)
    first = sample(logits, torch.Generator().manual_seed(3))
    again = sample(logits, torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    freq = torch.bincount(first, minlength=3).float() / len(first)
    assert torch.allclose(freq, torch.tensor([0.1, 0.6, 0.3]), atol=0.015)
