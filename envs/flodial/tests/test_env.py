import asyncio

import pytest

from arew.envs.base import ActiveReasoningEnv, Channel
from arew.envs.registry import make_env
from arew.envs.users import OfflineUser, SimulatedUser, UserReply
from arew.envs.users.base import count
from arew_flodial import FloDialEnv

CANDIDATES = [
    "The fan is broken.",
    "The thermal paste has dried out.",
    "Dust blocks the air vents.",
    "A background program overloads the processor.",
    "The battery is failing.",
]
GOLD = 1
TABLE = ["Is the fan spinning?", "Is the air vent blocked by dust?", "Does the laptop shut down when it gets hot?"]
ANSWERS = ["Yes", "No", "Yes"]
UNIFORM = "0.2, 0.2, 0.2, 0.2, 0.2"


class Scripted(SimulatedUser):
    """Maps each question to the given row (0-based) or None, in turn."""

    def __init__(self, *rows):
        super().__init__()
        self.rows = list(rows)
        self.requests = []

    async def reply(self, request):
        count(self.stats, "calls")
        self.requests.append(request)
        row = self.rows.pop(0)
        return UserReply(() if row is None else (row,), "offline")


def make(user=None, **options):
    return FloDialEnv(
        problem="Your laptop is overheating.",
        candidates=CANDIDATES,
        gold_idx=GOLD,
        table_questions=TABLE,
        table_answers=ANSWERS,
        max_turns=3,
        user=user if user is not None else OfflineUser(),
        **options,
    )


def act(env, question):
    return asyncio.run(env.act(f"<scratch>hm</scratch><interact>{question}</interact>"))


def update(env, scores):
    return env.update(f"<interact>{scores}</interact>")


def test_protocol_and_initial_message():
    env = make()
    assert isinstance(env, ActiveReasoningEnv)
    msgs = env.initial_messages()
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"] == env.system_prompt
    assert "Problem: Your laptop is overheating." in msgs[1]["content"]
    assert "2. The thermal paste has dried out." in msgs[1]["content"] and "Turn 1 of 3" in msgs[1]["content"]
    assert not any(q in msgs[1]["content"] for q in TABLE)  # the table stays with the user
    assert env.counterfactual_feedback() is None and "<answer>" in env.final_turn_notice()


@pytest.mark.parametrize(
    "question, word, critique",
    [
        ("Is the fan running and spinning?", "Yes", 1),
        ("Are the air vents blocked by dust?", "No", 1),  # a No rules out as much as a Yes (env docstring)
        ("Does it shut down when it gets hot?", "Yes", 1),
        ("Is the screen cracked?", "Unknown", -1),
    ],
)
def test_offline_user_and_as_critique(question, word, critique):
    env = make()
    step = act(env, question)
    assert step.info["user_answer"] == word and f"User: {word}." in step.feedback
    assert (step.critique, step.channel, step.valid) == (critique, Channel.AS, True)
    assert step.info["as_proxy"] == int(word != "Unknown")


def test_repeated_row_is_unknown_even_when_worded_differently():
    env = make(Scripted(0, 0))
    assert act(env, "Is the fan spinning?").critique == 1
    update(env, "0.1, 0.4, 0.2, 0.2, 0.1")
    step = act(env, "Does the fan turn?")
    assert step.info["user_answer"] == "Unknown" and step.info["repeat"] and step.critique == -1
    p = env.proxies()
    assert p["as"] == [1, 0] and p["n_repeats"] == 1.0 and p["n_unknown"] == 1.0
    assert p["table_coverage"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("payload", ["", "42", "<answer>0.2</answer>", "x" * 400])
def test_invalid_question_is_minus_one(payload):
    user = Scripted()
    env = make(user)
    step = asyncio.run(env.act(f"<interact>{payload}</interact>"))
    assert (step.critique, step.valid) == (-1, False) and "invalid because" in step.feedback
    assert user.requests == [] and env.proxies()["as"] == [0]


@pytest.mark.parametrize(
    "row, scores, critique",
    [
        (0, "0.1, 0.3, 0.2, 0.2, 0.2", 1),  # Yes, gold rose
        (0, "0.1, 0.2, 0.1, 0.1, 0.1", -1),  # Yes, gold unchanged (others fell)
        (1, "0.2, 0.3, 0.1, 0.2, 0.15", 1),  # No, gold rose
        (1, "0.3, 0.25, 0.1, 0.2, 0.15", -1),  # No, gold rose but another candidate rose past it
        (1, "0.3, 0.1, 0.3, 0.2, 0.1", -1),  # No, gold fell
    ],
)
def test_bt_after_yes_or_no_needs_the_gold_score_to_rise(row, scores, critique):
    env = make(Scripted(row))
    act(env, "q?")
    step = update(env, scores)
    assert step.critique == critique and step.info["bt_rule"] == "gold_rise"
    assert step.info["bt_proxy"] == pytest.approx(float(scores.split(", ")[GOLD]) - 0.2)


@pytest.mark.parametrize(
    "second, critique",
    [
        ("0.45, 0.3, 0.05, 0.1, 0.1", 1),  # the leader's lead over the gold shrank: toward the top
        ("0.35, 0.3, 0.05, 0.05, 0.05", 1),
        ("0.6, 0.3, 0.0, 0.0, 0.0", -1),  # the gold's score and share rose, the leader's lead held: a decoy kept on top
    ],
)
def test_bt_needs_the_gold_to_move_toward_the_top(second, critique):
    env = make(Scripted(0, 2))
    act(env, "q?")
    assert update(env, "0.5, 0.2, 0.1, 0.1, 0.1").critique == -1  # a candidate put above the gold
    act(env, "q2?")
    assert update(env, second).critique == critique


@pytest.mark.parametrize("saturation, critique", [(True, 1), (False, -1)])
def test_bt_saturated_gold_score(saturation, critique):
    env = make(Scripted(0, 2), bt_saturation=saturation)
    act(env, "q?")
    assert update(env, "0, 1, 0, 0, 0").critique == 1
    act(env, "q2?")
    assert update(env, "0, 1, 0, 0, 0").critique == critique


@pytest.mark.parametrize("row, scores, critique", [(None, UNIFORM, 1), (None, "0.2, 0.3, 0.2, 0.2, 0.2", -1)])
def test_bt_after_unknown_requires_unchanged_belief(row, scores, critique):
    env = make(Scripted(row))
    act(env, "q?")
    step = update(env, scores)
    assert step.critique == critique and step.info["bt_rule"] == "invariance"


def test_bt_after_invalid_question_and_repeat_is_invariance_against_previous_valid_belief():
    env = make(Scripted(0, 0))
    act(env, "q?")
    update(env, "0.1, 0.5, 0.1, 0.2, 0.1")
    act(env, "q again?")  # repeated row -> Unknown
    assert update(env, "0.1, 0.5, 0.1, 0.2, 0.1").critique == 1
    asyncio.run(env.act("no tags"))
    assert update(env, "0.1, 0.6, 0.1, 0.1, 0.1").critique == -1


@pytest.mark.parametrize("scores", ["0.2, 0.2, 0.2, 0.2", "0.2, 0.2, 0.2, 0.2, 2", "", "inf, 0, 0, 0, 0"])
def test_invalid_update_keeps_previous_belief(scores):
    env = make(Scripted(0, None))
    act(env, "q?")
    update(env, "0.1, 0.5, 0.1, 0.2, 0.1")
    act(env, "q2?")
    step = update(env, scores)
    assert (step.critique, step.valid, step.info["bt_proxy"]) == (-1, False, 0.0)
    assert env.proxies()["gold_score"] == 0.5


def test_full_episode_reward_and_proxies():
    env = make(Scripted(0, 1, None))
    for q, scores in [
        ("a?", "0.1, 0.4, 0.2, 0.2, 0.1"),
        ("b?", "0.1, 0.6, 0.1, 0.1, 0.1"),
        ("c?", "0.1, 0.6, 0.1, 0.1, 0.1"),
    ]:
        act(env, q)
        update(env, scores)
    assert env.phase == "answer"
    step = env.answer("<answer>0.1, 0.6, 0.1, 0.1, 0.1</answer>")
    assert step.done and step.critique == 0 and env.reward() == 1.0
    p = env.proxies()
    assert p["as"] == [1, 1, 0] and p["bt"] == [pytest.approx(0.2), pytest.approx(0.2), 0.0]
    assert (p["n_yes"], p["n_no"], p["n_unknown"], p["n_informative"]) == (1.0, 1.0, 1.0, 2.0)
    assert p["gold_rise_rate"] == 1.0 and p["final_equals_first_guess"] == 1.0 and p["c_bt"] == pytest.approx(0.4)
    assert all(isinstance(v, float) for k, v in p.items() if k not in ("as", "bt"))


@pytest.mark.parametrize(
    "final, reward", [("0.1, 0.6, 0.1, 0.1, 0.1", 1.0), ("0.6, 0.6, 0, 0, 0", 0.0), ("1, 0, 0, 0, 0", 0.0), ("1", 0.0)]
)
def test_reward_unique_argmax(final, reward):
    env = make(Scripted())
    env.answer(f"<answer>{final}</answer>")
    assert env.reward() == reward


def test_answer_in_update_round_scored_as_update_and_feedback_ablation():
    env = make(Scripted(0))
    act(env, "q?")
    step = env.answer("<answer>0.1, 0.1, 0.6, 0.1, 0.1</answer>")
    assert step.critique == -1 and step.info["bt_rule"] == "gold_rise" and len(env.proxies()["bt"]) == 1
    env = make(Scripted(2), feedback_ablation=True)
    step = act(env, "q?")
    assert "User: Unknown." in step.feedback and step.info["user_answer"] == "Yes" and step.critique == 1


def test_make_env_from_row_and_table_validation():
    info = {
        "task": "flodial-hard",
        "problem": "Your laptop is overheating.",
        "candidates": CANDIDATES,
        "gold_idx": GOLD,
        "table_questions": TABLE,
        "table_answers": ANSWERS,
        "max_turns": 10,
    }
    env = make_env("flodial-hard", info, 3, user_row_threshold=0.9)
    assert isinstance(env, FloDialEnv) and env.max_turns == 10 and env.n == 5
    with pytest.raises(ValueError):
        make_env("flodial-easy", info, 3)
    with pytest.raises(ValueError):
        FloDialEnv("p", CANDIDATES, 1, TABLE, ["Yes", "Maybe", "No"])


@pytest.mark.parametrize(
    "question",
    [
        "Is the fan spinning and is the air vent blocked by dust?",
        "Is the fan spinning, is the vent blocked by dust, and does the laptop shut down when hot?",
    ],
)
def test_offline_user_gives_unknown_to_a_question_about_several_checks(question):
    # each check alone is answered (test_offline_user_and_as_critique); naming several at once used to
    # get the best-matching row's answer, which does not say which check it answers (users/offline.py)
    env = make()
    step = act(env, question)
    assert step.info["user_answer"] == "Unknown" and step.info["row"] is None and step.critique == -1


@pytest.mark.parametrize(
    "scores, critique",
    [
        ("0.3, 0.3, 0.3, 0.3, 0.3", -1),  # every score raised: the gold rose, its share did not
        ("1, 1, 1, 1, 1", -1),
        ("0.1, 0.3, 0.3, 0.1, 0.1", 1),  # the gold and one other raised, the rest lowered: its share rose
        ("0.25, 0.25, 0.25, 0.25, 0", 1),  # one candidate ruled out, the others renormalised
    ],
)
def test_bt_after_yes_or_no_needs_the_gold_share_to_rise_too(scores, critique):
    env = make(Scripted(0))
    act(env, "q?")
    step = update(env, scores)
    assert step.critique == critique and step.info["bt_rule"] == "gold_rise"


def test_saturation_needs_the_gold_to_be_the_only_top_score():
    env = make(Scripted(0, 2))
    act(env, "q?")
    assert update(env, "1, 1, 1, 1, 1").critique == -1  # every score to 1: no share gained
    act(env, "q2?")
    assert update(env, "1, 1, 1, 1, 1").critique == -1  # stays at 1, but tied with every other candidate
    env = make(Scripted(0, 2))
    act(env, "q?")
    assert update(env, "0.5, 1, 0.5, 0.5, 0.5").critique == 1
    act(env, "q2?")
    assert update(env, "0.5, 1, 0.5, 0.5, 0.5").critique == 1  # 1 and the only top: no rise possible
