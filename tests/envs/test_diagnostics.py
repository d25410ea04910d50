"""The self-locking diagnostics against the paper's definitions, on hand-built episodes.

Belief consistency (Observation 3) compares judgments, ties included; C_BT (Def. 3.2) sums the
positive belief progress up to the final answer; I_AS (Def. 3.1) does not depend on the size
of the replay's prior pool.
"""

import asyncio

import numpy as np
import pytest

from arew.envs.beliefs import top_options
from arew.envs.parsing import PairQuery
from arew.envs.users import OfflineUser
from arew_flodial import FloDialEnv
from arew_mediq import MediQEnv
from arew_preference import PreferenceEnv
from arew_preference.generator import VARIANTS, generate_instance, sample_preferences
from arew_preference.rules import answer_signs, bayes_replay, cosine, is_informative, masked_differences

CANDIDATES = ["Fan broken.", "Paste dried.", "Dusty vents.", "Busy processor.", "Old battery."]
GOLD = 1


def flodial(max_turns=2):
    return FloDialEnv(
        problem="Your laptop is overheating.",
        candidates=CANDIDATES,
        gold_idx=GOLD,
        table_questions=["Is the fan spinning?"],
        table_answers=["Yes"],
        max_turns=max_turns,
        user=OfflineUser(),
    )


def mediq(max_turns=2):
    return MediQEnv(
        initial_info="A 30-year-old woman comes to the clinic.",
        question="Which of the following is the most likely diagnosis?",
        options=["Pyelonephritis", "Influenza", "Cystitis", "Appendicitis"],
        answer_idx=2,
        facts=["Patient is a 30-year-old woman.", "She has burning pain when urinating."],
        known_fact_ids=[0],
        max_turns=max_turns,
        user=OfflineUser(),
    )


def play(env, beliefs, final):
    """One question (answered Unknown by the offline user) and one update per belief, then the answer."""
    for scores in beliefs:
        asyncio.run(env.act("<interact>What colour is the sky on Mars?</interact>"))
        env.update(f"<interact>{scores}</interact>")
    env.answer(f"<answer>{final}</answer>")
    return env.proxies()


# --- belief consistency -------------------------------------------------------------------


def test_top_options():
    assert top_options([0.1, 0.6, 0.3]) == {1}
    assert top_options([0.4, 0.4, 0.2]) == {0, 1}
    assert top_options([0.4, 0.4 - 1e-12, 0.2]) == {0, 1}


@pytest.mark.parametrize("make", [flodial, mediq], ids=["flodial", "mediq"])
def test_two_different_ties_are_not_consistent(make):
    n = 5 if make is flodial else 4
    first = ", ".join(["0.4", "0.4"] + ["0.1"] * (n - 2))
    final = ", ".join(["0.1", "0.1", "0.4", "0.4"] + ["0.0"] * (n - 4))
    p = play(make(), [first, first], final)
    assert p["answered"] == 1.0 and p["final_equals_first_guess"] == 0.0  # the old code said 1.0


@pytest.mark.parametrize(
    ("first", "final", "expected"),
    [
        ("0.4, 0.4, 0.1, 0.1, 0.0", "0.4, 0.4, 0.1, 0.1, 0.0", 1.0),  # the same tie kept: no revision
        ("0.3, 0.3, 0.2, 0.2, 0.0", "0.5, 0.5, 0.0, 0.0, 0.0", 1.0),  # same top set, other scores
        ("0.4, 0.4, 0.1, 0.1, 0.0", "0.1, 0.7, 0.1, 0.1, 0.0", 0.0),  # tie resolved: revised
        ("0.1, 0.7, 0.1, 0.1, 0.0", "0.1, 0.4, 0.4, 0.1, 0.0", 0.0),  # single option opened to a tie
        ("0.1, 0.7, 0.1, 0.1, 0.0", "0.1, 0.5, 0.2, 0.2, 0.0", 1.0),  # same unique top
        ("0.7, 0.1, 0.1, 0.1, 0.0", "0.1, 0.7, 0.1, 0.1, 0.0", 0.0),  # changed its mind
    ],
)
def test_consistency_compares_top_sets(first, final, expected):
    assert play(flodial(max_turns=1), [first], final)["final_equals_first_guess"] == expected


def test_no_consistency_without_a_valid_final_answer():
    assert play(flodial(max_turns=1), ["0.1, 0.7, 0.1, 0.1, 0.0"], "oops")["final_equals_first_guess"] == 0.0


# --- C_BT ------------------------------------------------------------------------------


def test_c_bt_counts_the_final_answers_belief_step():
    # gold scores: prior 0.2 -> 0.4 (+0.2) -> 0.3 (-0.1) -> final 0.6 (+0.3)
    p = play(flodial(), ["0.1, 0.4, 0.2, 0.2, 0.1", "0.2, 0.3, 0.2, 0.2, 0.1"], "0.1, 0.6, 0.1, 0.1, 0.1")
    assert p["bt"] == [pytest.approx(0.2), pytest.approx(-0.1)]
    assert p["bt_final"] == pytest.approx(0.3)
    assert p["c_bt"] == pytest.approx(0.5)  # the old code left out the final +0.3: 0.2


def test_c_bt_ignores_a_final_step_down_and_an_invalid_final_answer():
    p = play(flodial(), ["0.1, 0.4, 0.2, 0.2, 0.1"] * 2, "0.3, 0.2, 0.2, 0.2, 0.1")
    assert p["bt_final"] == pytest.approx(-0.2) and p["c_bt"] == pytest.approx(0.2)
    p = play(flodial(), ["0.1, 0.4, 0.2, 0.2, 0.1"] * 2, "not a vector")
    assert p["bt_final"] == 0.0 and p["c_bt"] == pytest.approx(0.2)


def test_c_bt_counts_an_answer_in_place_of_an_update_once():
    env = flodial()
    asyncio.run(env.act("<interact>What colour is the sky on Mars?</interact>"))
    env.answer("<answer>0.1, 0.6, 0.1, 0.1, 0.1</answer>")  # answers in the update round
    p = env.proxies()
    assert p["bt"] == [pytest.approx(0.4)] and p["bt_final"] == 0.0 and p["c_bt"] == pytest.approx(0.4)


def test_c_bt_in_mediq_uses_the_gold_margin_up_to_the_final_answer():
    # margins (gold C): prior 0 -> 0.2 -> final 0.5
    p = play(mediq(max_turns=1), ["0.2, 0.2, 0.4, 0.1"], "0.1, 0.1, 0.6, 0.0")
    assert p["c_bt"] == pytest.approx(0.2 + 0.3)


def test_c_bt_in_pe_counts_the_final_cosine_step():
    items = [[3, 1, 2, 2], [1, 3, 2, 2], [4, 4, 2, 2], [2, 5, 1, 3]]
    w_star = np.array([0.9, 0.1, 0.5, 0.5])
    env = PreferenceEnv(items, w_star, subset_size=2, max_turns=1, reward_kind="binary", replay_samples=20)
    asyncio.run(env.act("<interact>1, 2 | 1, 2</interact>"))
    env.update("<interact>0.6, 0.4, 0.5, 0.5</interact>")
    env.answer("<answer>0.9, 0.1, 0.5, 0.5</answer>")
    c = [cosine(np.full(4, 0.5), w_star), cosine([0.6, 0.4, 0.5, 0.5], w_star), 1.0]
    p = env.proxies()
    assert p["bt_final"] == pytest.approx(c[2] - c[1])
    assert p["c_bt"] == pytest.approx(c[2] - c[0])


# --- I_AS --------------------------------------------------------------------------------


def informative_episodes(variant, n_episodes, n_queries, seed):
    """PE instances with ``n_queries`` new informative queries each and the user's answers."""
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(n_episodes):
        inst = generate_instance(variant, rng)
        items, w_star = np.array(inst["items"], dtype=float), np.array(inst["w_star"], dtype=float)
        queries = []
        while len(queries) < n_queries:
            i, j = rng.choice(len(items), 2, replace=False)
            attrs = tuple(sorted(rng.choice(variant.n_attrs, variant.subset_size, replace=False).tolist()))
            q = PairQuery(int(i), int(j), attrs)
            if is_informative(masked_differences(items, [q]))[0] and all(q.key != e.key for e in queries):
                queries.append(q)
        answers = answer_signs(w_star, masked_differences(items, queries))[0].tolist()
        episodes.append((items, w_star, queries, answers))
    return episodes


def test_i_as_does_not_depend_on_the_replay_pool_size():
    """40 PE-G episodes of 6 informative queries, pools of 2000 (the default), 4000 and 8000
    prior draws (fixed seeds): the mean I_AS in nats agrees within 0.05 nats (about 1.5 %),
    while the old I_AS, the difference of masses on w*, falls about 4-fold over the same
    pools. (Smaller pools run low on such informative episodes: see ReplayResult.)"""

    variant = VARIANTS["pe-g-s2"]
    episodes = informative_episodes(variant, 40, 6, seed=0)
    nats, old = {}, {}
    for n in (2000, 4000, 8000):
        results = [
            bayes_replay(items, w_star, queries, answers, sample_preferences(np.random.default_rng([k, n]), n, 6))
            for k, (items, w_star, queries, answers) in enumerate(episodes)
        ]
        nats[n] = np.mean([r.info_gain for r in results])
        old[n] = np.mean([r.mass_true[-1] - r.mass_true[0] for r in results])
    assert max(nats.values()) - min(nats.values()) < 0.05, nats
    assert min(nats.values()) > 3.0  # the queries did carry information
    assert old[2000] > 3 * old[8000], old


def test_env_reports_i_as_in_nats_whatever_its_replay_samples():
    items, w_star, queries, answers = informative_episodes(VARIANTS["pe-g-s2"], 1, 4, seed=3)[0]
    values = {}
    for n in (2000, 8000):
        env = PreferenceEnv(items, w_star, subset_size=2, max_turns=4, reward_kind="binary", replay_samples=n)
        for q in queries:
            pair, attrs = f"{q.first + 1}, {q.second + 1}", ", ".join(str(a + 1) for a in q.attrs)
            asyncio.run(env.act(f"<interact>{pair} | {attrs}</interact>"))
            env.update("<interact>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</interact>")
        env.answer("<answer>0.5, 0.5, 0.5, 0.5, 0.5, 0.5</answer>")
        p = env.proxies()
        assert "i_as" not in p and "i_as_near" not in p  # renamed: the meaning changed
        values[n] = p["i_as_nats"]
    assert values[2000] > 1.0 and values[2000] == pytest.approx(values[8000], abs=0.15), values
