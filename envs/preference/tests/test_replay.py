import numpy as np
import pytest

from arew.envs.parsing import PairQuery
from arew_preference.generator import VARIANTS, generate_instance
from arew_preference.rules import answer_signs, bayes_replay, masked_differences


def test_tiny_replay_by_hand():
    items = np.array([[2, 1], [1, 2]])
    w_star = np.array([0.8, 0.2])
    candidates = np.array([[0.9, 0.1], [0.1, 0.9], [0.6, 0.4], [0.3, 0.7]])
    res = bayes_replay(items, w_star, [PairQuery(0, 1, (0, 1))], [1], candidates)
    # Yes keeps the candidates with w1 > w2: [0.9, 0.1], [0.6, 0.4] and w* itself
    assert res.mass_true.tolist() == pytest.approx([1 / 5, 1 / 3])
    # I_AS in nats: log of the posterior-to-prior mass on w*, 5 pool members -> 3
    assert res.info_gain == pytest.approx(np.log(5 / 3))
    assert res.info_gain_limit == pytest.approx(np.log(5))
    assert res.oracle_guess == pytest.approx([(0.9 + 0.6 + 0.8) / 3, (0.1 + 0.4 + 0.2) / 3])


def test_replay_without_queries_or_with_uninformative_ones_gains_nothing():
    items = np.array([[2, 1], [1, 2], [2, 1]])
    w_star = np.array([0.8, 0.2])
    candidates = np.array([[0.9, 0.1], [0.1, 0.9]])
    assert bayes_replay(items, w_star, [], [], candidates).info_gain == 0.0
    same = bayes_replay(items, w_star, [PairQuery(0, 2, (0, 1))], [0], candidates)
    assert same.info_gain == 0.0 and same.oracle_guess == pytest.approx([0.6, 0.4])


def test_equal_answer_keeps_only_exact_ties():
    items = np.array([[2, 1], [1, 2]])
    w_star = np.array([0.5, 0.5])
    candidates = np.array([[0.3, 0.3], [0.3, 0.31], [0.9, 0.1]])
    res = bayes_replay(items, w_star, [PairQuery(0, 1, (0, 1))], [0], candidates)
    assert res.mass_true[-1] == pytest.approx(1 / 2)


def test_truth_survives_random_queries_including_ties():
    rng = np.random.default_rng(0)
    variant = VARIANTS["pe-g-s2"]
    for _ in range(50):
        inst = generate_instance(variant, rng)
        items, w_star = np.array(inst["items"]), np.array(inst["w_star"])
        queries = []
        for _ in range(10):
            i, j = rng.choice(10, 2, replace=False)
            queries.append(PairQuery(int(i), int(j), tuple(sorted(rng.choice(6, 2, replace=False).tolist()))))
        answers = answer_signs(w_star, masked_differences(items, queries))[0]
        candidates = rng.random((300, 6)).round(2)
        res = bayes_replay(items, w_star, queries, answers, candidates)
        assert res.mass_true[-1] > 0 and np.all(np.diff(res.mass_true) >= 0)
