import asyncio

import numpy as np
import pytest

from arew.envs.base import ActiveReasoningEnv, Channel, StepResult
from arew_preference import PreferenceEnv
from arew_preference.rules import cosine, outcome_reward

# Four attributes, S = 2. Pairs used below (1-based as the agent writes them):
#   1 vs 2 on {1,2}: diff (+2, -2) informative;  on {1,3}: (+2, 0) dominated;
#   on {3,4}: (0, 0) all equal;  3 vs 1 on {1,2}: (+1, +3) dominated.
ITEMS = [[3, 1, 2, 2], [1, 3, 2, 2], [4, 4, 2, 2], [2, 5, 1, 3]]
W_STAR = [0.9, 0.1, 0.5, 0.5]


def make(w_star=W_STAR, **options):
    options.setdefault("replay_samples", 200)
    return PreferenceEnv(ITEMS, w_star, subset_size=2, max_turns=3, reward_kind="binary", **options)


def act(env, payload):
    return asyncio.run(env.act(f"<scratch>ok</scratch><interact>{payload}</interact>"))


def update(env, payload):
    return env.update(f"<scratch>ok</scratch><interact>{payload}</interact>")


def test_env_implements_protocol():
    env = make()
    assert isinstance(env, ActiveReasoningEnv)
    msgs = env.initial_messages()
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == env.system_prompt
    assert "Movie 4: 2, 5, 1, 3" in msgs[1]["content"] and "Turn 1 of 3" in msgs[1]["content"]
    assert "<answer>" in env.final_turn_notice()


@pytest.mark.parametrize(
    "query, word",
    [("1, 2 | 1, 2", "Yes"), ("2, 1 | 1, 2", "No"), ("1, 2 | 3, 4", "Equal"), ("1, 3 | 1, 3", "No")],
)
def test_user_answers_by_weighted_sum_on_queried_attributes(query, word):
    step = act(make(), query)
    assert step.info["user_answer"] == word and f"User: {word}." in step.feedback


def test_user_answers_equal_on_an_exact_tie_of_an_informative_pair():
    step = act(make(w_star=[0.3, 0.3, 0.2, 0.2]), "1, 2 | 1, 2")
    assert step.info["user_answer"] == "Equal" and step.critique == 1


def test_user_treats_float_rounding_noise_as_a_tie():
    # 0.1 * 3 - 0.3 * 1 is 5.6e-17 in floating point, but the weighted sums are equal
    env = PreferenceEnv([[4, 1, 1], [1, 1, 2]], [0.1, 0.5, 0.3], 2, 3, "binary", replay_samples=10)
    step = asyncio.run(env.act("<interact>1, 2 | 1, 3</interact>"))
    assert step.info["user_answer"] == "Equal"


def test_user_restricts_to_queried_attributes_only():
    # on {2,4}: item 1 (1, 2) vs item 4 (5, 3): No whatever attributes 1 and 3 say
    assert act(make(w_star=[1.0, 0.01, 1.0, 0.01]), "1, 4 | 2, 4").info["user_answer"] == "No"
    assert act(make(w_star=[1.0, 0.01, 1.0, 0.01]), "1, 4 | 1, 3").info["user_answer"] == "Yes"


@pytest.mark.parametrize(
    "query, critique, informative",
    [
        ("1, 2 | 1, 2", 1, True),
        ("1, 2 | 1, 3", -1, False),
        ("1, 2 | 3, 4", -1, False),
        ("3, 1 | 1, 2", -1, False),
    ],
)
def test_as_critique_informative_dominated_all_equal(query, critique, informative):
    step = act(make(), query)
    assert (step.critique, step.channel, step.valid) == (critique, Channel.AS, True)
    assert step.info["informative"] is informative and step.info["as_proxy"] == int(critique == 1)


@pytest.mark.parametrize("again", ["1, 2 | 1, 2", "2, 1 | 1, 2", "2, 1 | 2, 1"])
def test_as_critique_repeat_of_same_pair_and_attribute_set(again):
    env = make()
    assert act(env, "1, 2 | 1, 2").critique == 1
    update(env, "0.5, 0.5, 0.5, 0.5")
    step = act(env, again)
    assert step.critique == -1 and step.info["repeat"] and step.info["informative"]
    assert env.proxies()["as"] == [1, 0]


def test_same_pair_on_other_attributes_is_not_a_repeat():
    env = make()
    act(env, "1, 4 | 1, 2")
    update(env, "0.5, 0.5, 0.5, 0.5")
    step = act(env, "1, 4 | 2, 4")
    assert not step.info["repeat"]


@pytest.mark.parametrize("text", ["3, 7 | 1, 2", "1, 1 | 1, 2", "1, 2 | 1", "1, 2", "<answer>1</answer>"])
def test_as_critique_invalid_query_explains_and_spends_the_round(text):
    env = make()
    step = act(env, text)
    assert (step.critique, step.valid, step.done) == (-1, False, False)
    assert "invalid because" in step.feedback and "<interact>" in step.feedback
    assert env.phase == "update" and env.proxies()["as"] == [0]


def _bt_after(query, guess, w_star=W_STAR):
    env = make(w_star=w_star)
    act(env, query)
    return env, update(env, guess)


def test_bt_critique_sign_of_cosine_change_after_informative_query():
    _, up = _bt_after("1, 2 | 1, 2", "0.9, 0.2, 0.5, 0.5")
    _, down = _bt_after("1, 2 | 1, 2", "0.1, 0.9, 0.5, 0.5")
    _, same = _bt_after("1, 2 | 1, 2", "0.2, 0.2, 0.2, 0.2")  # same direction as the 0.5 start
    assert (up.critique, down.critique, same.critique) == (1, -1, 0)
    assert up.channel == Channel.BT and up.info["bt_proxy"] > 0 > down.info["bt_proxy"]


@pytest.mark.parametrize(
    "guess, critique, rule",
    [
        ("0.6, 0.4, 0.9, 0.1", 1, "cosine"),  # w* itself
        ("0.5, 0.5, 0.9, 0.1", -1, "contradicts_answer"),  # closer to w*, but it predicts Equal, not Yes
        ("0.45, 0.5, 0.9, 0.1", -1, "contradicts_answer"),  # closer to w*, but it predicts No
        ("0.55, 0.5, 0.9, 0.1", 1, "cosine"),
    ],
)
def test_bt_plus_one_needs_the_guess_to_predict_the_answer_just_given(guess, critique, rule):
    # the addition to the paper's rule (env docstring): a step towards w* that ignores the answer is -1
    env, step = _bt_after("1, 2 | 1, 2", guess, w_star=[0.6, 0.4, 0.9, 0.1])  # diff (+2, -2): Yes
    assert step.info["bt_proxy"] > 0 and (step.critique, step.info["bt_rule"]) == (critique, rule)


def test_bt_after_an_equal_answer_has_no_prediction_check():
    env, step = _bt_after("1, 2 | 1, 2", "0.35, 0.3, 0.2, 0.2", w_star=[0.3, 0.3, 0.2, 0.2])
    assert env.proxies()["bt"][0] > 0 and step.critique == 1


def test_bt_compares_against_previous_valid_guess():
    env = make()
    act(env, "1, 2 | 1, 2")
    update(env, "0.9, 0.1, 0.5, 0.5")  # exactly w*
    act(env, "1, 4 | 1, 2")  # informative: diff (+1, -4)
    step = update(env, "0.9, 0.2, 0.5, 0.5")  # better than the start, worse than w*
    assert step.critique == -1


@pytest.mark.parametrize("query", ["1, 2 | 1, 3", "1, 2 | 3, 4", "3, 7 | 1, 2"])
def test_bt_zero_after_uninformative_or_invalid_query(query):
    env, step = _bt_after(query, "0.9, 0.1, 0.5, 0.5")
    assert step.critique == 0 and step.valid
    assert step.info["bt_proxy"] > 0


def test_bt_zero_after_informative_but_repeated_query():
    env = make()
    act(env, "1, 2 | 1, 2")
    update(env, "0.5, 0.5, 0.5, 0.5")
    act(env, "2, 1 | 2, 1")
    assert update(env, "0.9, 0.1, 0.5, 0.5").critique == 0


@pytest.mark.parametrize("guess", ["0.9, 0.1, 0.5", "0.9, 0.1, 0.5, 1.2", "nan, 0, 0, 0", "0, 0, 0, 0", ""])
def test_invalid_guess_is_minus_one_and_keeps_previous_guess(guess):
    env = make()
    act(env, "1, 2 | 1, 2")
    update(env, "0.9, 0.1, 0.5, 0.5")
    act(env, "1, 4 | 1, 2")
    step = update(env, guess)
    assert (step.critique, step.valid, step.info["bt_proxy"]) == (-1, False, 0.0)
    assert "invalid because" in step.feedback and "previous valid estimate is kept" in step.feedback
    act(env, "1, 4 | 2, 4")  # diff (-4, -1): dominated, so the next update is judged by proxy only
    step = update(env, "0.9, 0.1, 0.5, 0.5")
    assert step.info["bt_proxy"] == pytest.approx(0.0, abs=1e-12)


def test_turn_flow_feedback_and_protocol_errors():
    env = make()
    with pytest.raises(RuntimeError):
        env.update("<interact>0.5, 0.5, 0.5, 0.5</interact>")
    for turn in range(3):
        assert env.phase == "act"
        act(env, "1, 2 | 1, 2")
        with pytest.raises(RuntimeError):
            act(env, "1, 2 | 1, 2")
        step = update(env, "0.5, 0.5, 0.5, 0.5")
        expected = f"Turn {turn + 2} of 3" if turn < 2 else "<answer>"
        assert expected in step.feedback and not step.done
    assert env.phase == "answer"
    with pytest.raises(RuntimeError):
        act(env, "1, 2 | 3, 4")
    step = env.answer("<answer>0.9, 0.1, 0.5, 0.5</answer>")
    assert step.done and step.valid and step.critique == 0 and env.reward() == 1.0
    with pytest.raises(RuntimeError):
        env.answer("<answer>0.9, 0.1, 0.5, 0.5</answer>")


def test_early_answer_in_action_round_ends_episode_without_bt_entry():
    env = make()
    step = env.answer("<answer>0.9, 0.1, 0.5, 0.5</answer>")
    assert step.done and step.critique == 0 and env.reward() == 1.0
    assert env.proxies()["as"] == [] and env.proxies()["bt"] == []


def test_answer_in_update_round_is_scored_as_that_update():
    env = make()
    act(env, "1, 2 | 1, 2")
    step = env.answer("<answer>0.1, 0.9, 0.5, 0.5</answer>")
    assert step.done and step.channel == Channel.BT and step.critique == -1
    assert len(env.proxies()["bt"]) == 1 and env.proxies()["bt"][0] < 0


def test_invalid_final_answer_scores_zero_even_though_prompt_shows_answer_tag():
    env = make()
    assert "<answer>" in env.system_prompt
    step = env.answer("I think the weights are 0.9, 0.1, 0.5, 0.5")
    assert step.done and not step.valid and step.critique == -1 and env.reward() == 0.0
    assert make().reward() == 0.0


def test_feedback_ablation_hides_answer_but_keeps_critiques():
    env = make(feedback_ablation=True)
    step = act(env, "1, 2 | 1, 2")
    assert "User: Unknown." in step.feedback and step.critique == 1
    assert env.proxies()["i_as_nats"] > 0


def test_reward_rules_paper_binary_and_continuous():
    w_star = np.array(W_STAR)
    base = float(cosine(np.full(4, 0.5), w_star))

    # a guess whose cosine gain over the default is known, by mixing the default with w*
    def guess_with_gain(gain):
        mix = np.linspace(0, 1, 100001)[:, None] * w_star + (1 - np.linspace(0, 1, 100001))[:, None] * 0.5
        sims = cosine(mix, w_star)
        return mix[np.argmin(np.abs(sims - (base + gain)))]

    assert outcome_reward(guess_with_gain(0.035), w_star, "binary") == 1.0
    assert outcome_reward(guess_with_gain(0.025), w_star, "binary") == 0.0
    assert outcome_reward(np.full(4, 0.5), w_star, "binary") == 0.0
    half = guess_with_gain((1 - base) / 2)
    assert outcome_reward(half, w_star, "continuous") == pytest.approx(0.5, abs=1e-3)
    assert outcome_reward(w_star * 3, w_star, "continuous") == pytest.approx(1.0)
    assert outcome_reward(np.full(4, 0.5), w_star, "continuous") == pytest.approx(0.0, abs=1e-12)
    assert outcome_reward(np.array([0.0, 1.0, 0.0, 0.0]), w_star, "continuous") == 0.0


def test_reward_rule_reference_thresholds_half_cosine_plus_one():
    w_star = np.array([1.0, 0.0])
    at = lambda c: np.array([c, np.sqrt(1 - c * c)])  # noqa: E731
    assert outcome_reward(at(0.885), w_star, "binary", rule="reference") == 1.0
    assert outcome_reward(at(0.875), w_star, "binary", rule="reference") == 0.0
    env = make(reward_rule="reference")
    env.answer("<answer>0.5, 0.5, 0.5, 0.5</answer>")  # cos 0.870: (1.870)/2 < 0.94
    assert env.reward() == 0.0
    with pytest.raises(ValueError):
        make(reward_rule="nope")


def test_proxies_track_per_turn_values_and_diagnostics():
    env = make()
    act(env, "1, 2 | 1, 2")
    update(env, "0.8, 0.2, 0.5, 0.5")
    act(env, "1, 2 | 1, 3")
    update(env, "0.3, 0.6, 0.5, 0.5")
    act(env, "bad")
    update(env, "bad")
    env.answer("<answer>0.8, 0.2, 0.5, 0.5</answer>")
    p = env.proxies()
    w = np.array(W_STAR)
    c = [cosine(np.full(4, 0.5), w), cosine([0.8, 0.2, 0.5, 0.5], w), cosine([0.3, 0.6, 0.5, 0.5], w)]
    assert p["as"] == [1, 0, 0]
    assert p["bt"] == pytest.approx([c[1] - c[0], c[2] - c[1], 0.0])
    assert p["bt_final"] == pytest.approx(c[1] - c[2])  # the answer steps back to the first guess
    assert p["c_bt"] == pytest.approx((c[1] - c[0]) + (c[1] - c[2]))  # Def. 3.2 sums up to the final belief
    assert p["n_informative"] == 1.0 and p["n_invalid"] == 2.0
    assert p["final_equals_first_guess"] == 1.0 and p["answered"] == 1.0
    assert p["cos_initial"] == pytest.approx(c[0]) and p["cos_belief"] == pytest.approx(c[1])
    assert p["reward"] == env.reward()
    assert 0.0 <= p["oracle_reward"] <= 1.0 and p["i_as_nats"] > 0
    assert all(isinstance(v, float) for k, v in p.items() if k not in ("as", "bt"))


def test_determinism_given_seed():
    def run(seed):
        env = make(seed=seed, replay_samples=500)
        steps = [act(env, "1, 2 | 1, 2"), update(env, "0.7, 0.3, 0.5, 0.5"), act(env, "1, 4 | 1, 2")]
        return steps, env.proxies()

    assert run(3) == run(3)
    assert run(3)[1]["oracle_cos"] != run(4)[1]["oracle_cos"]
    assert all(isinstance(s, StepResult) for s in run(3)[0])
