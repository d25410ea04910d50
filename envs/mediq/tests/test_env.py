import asyncio

import numpy as np
import pytest

from arew.envs.base import ActiveReasoningEnv, Channel
from arew.envs.registry import make_env
from arew.envs.users import OfflineUser, SimulatedUser, UserReply
from arew.envs.users.base import count
from arew_mediq import MediQEnv

FACTS = [
    "Patient is a 30-year-old woman.",
    "She has had a fever for three days.",
    "She takes oral contraceptives.",
    "Her temperature is 39.2 C.",
    "She smokes one pack of cigarettes per day.",
    "She has burning pain when urinating.",
]
OPTIONS = ["Pyelonephritis", "Influenza", "Cystitis", "Appendicitis"]
GOLD = 2  # C


class Scripted(SimulatedUser):
    """Answers with the given fact ids in turn (0-based), recording each request."""

    def __init__(self, *replies):
        super().__init__()
        self.replies = list(replies)
        self.requests = []

    async def reply(self, request):
        count(self.stats, "calls")
        self.requests.append(request)
        return UserReply(tuple(self.replies.pop(0)), "offline")


def make(user=None, **options):
    return MediQEnv(
        initial_info="A 30-year-old woman comes to the clinic.",
        question="Which of the following is the most likely diagnosis?",
        options=OPTIONS,
        answer_idx=GOLD,
        facts=FACTS,
        known_fact_ids=[0],
        max_turns=3,
        user=user if user is not None else OfflineUser(),
        **options,
    )


def act(env, question):
    return asyncio.run(env.act(f"<scratch>think</scratch><interact>{question}</interact>"))


def update(env, scores, counterfactual=None):
    return env.update(f"<scratch>ok</scratch><interact>{scores}</interact>", counterfactual=counterfactual)


def test_protocol_prompt_and_initial_message():
    env = make()
    assert isinstance(env, ActiveReasoningEnv)
    msgs = env.initial_messages()
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"] == env.system_prompt
    user = msgs[1]["content"]
    assert "A 30-year-old woman comes to the clinic." in user and "C. Cystitis" in user and "Turn 1 of 3" in user
    assert "fever" not in user  # facts stay hidden
    assert "<answer>" in env.final_turn_notice() and "0.25" in env.system_prompt


def test_offline_patient_reveals_matching_facts_once_and_never_known_ones():
    env = make()
    step = act(env, "Do you have a fever?")
    assert step.critique == 1 and step.channel == Channel.AS and step.valid
    assert step.info["new_fact_ids"] == [2, 4]  # fever and temperature (1-based)
    assert FACTS[1] in step.feedback and FACTS[3] in step.feedback
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    step = act(env, "Is your temperature high, any fever?")  # same facts, already revealed
    assert step.critique == -1 and step.info["new_fact_ids"] == [] and "Unknown." in step.feedback
    assert "Patient is a 30-year-old" not in act(make(), "How old are you, are you a woman?").feedback


def test_at_most_two_facts_per_answer_and_only_open_ones_offered():
    user = Scripted([1, 2, 3], [2, 4])
    env = make(user)
    step = act(env, "Tell me everything.")
    assert step.info["new_fact_ids"] == [2, 3] and step.info["as_proxy"] == 2
    assert user.requests[0].candidates == (1, 2, 3, 4, 5) and user.requests[0].max_facts == 2
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    step = act(env, "Anything else at all?")
    assert user.requests[1].candidates == (3, 4, 5)
    assert step.info["new_fact_ids"] == [5]  # fact 2 (0-based) was revealed already: dropped


@pytest.mark.parametrize(
    "first, second, critique",
    [
        ("Do you smoke?", "Do you smoke?", -1),
        ("Do you smoke?", "do YOU smoke", -1),
        ("Do you smoke?", "Smoke, do you?", -1),
        ("Do you smoke?", "Do you smoke cigarettes?", 1),
    ],
)
def test_as_repeat_is_minus_one_even_when_new_facts_come_back(first, second, critique):
    env = make(Scripted([4], [5]))
    act(env, first)
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    step = act(env, second)
    assert step.info["new_fact_ids"] == [6]
    assert step.critique == critique and step.info["repeat"] is (critique == -1)
    assert env.proxies()["as"] == [1, 1] and env.proxies()["n_repeats"] == float(critique == -1)


@pytest.mark.parametrize("payload", ["", "   ", "12345?", "x" * 301, "<answer>1</answer>", "a\u202eb?"])
def test_invalid_question_is_minus_one_and_spends_the_round(payload):
    env = make(Scripted())
    step = asyncio.run(env.act(f"<interact>{payload}</interact>"))
    assert (step.critique, step.valid) == (-1, False) and "invalid because" in step.feedback
    assert env.phase == "update" and env.counterfactual_feedback() is None
    assert env.proxies()["as"] == [0]


def test_counterfactual_feedback_only_after_informative_feedback():
    env = make(Scripted([], [1]))
    assert env.counterfactual_feedback() is None
    act(env, "Do you travel?")
    assert env.counterfactual_feedback() is None
    update(env, "0.25, 0.25, 0.25, 0.25")
    real = act(env, "Do you have a fever?")
    cf = env.counterfactual_feedback()
    assert cf is not None and "Unknown." in cf and FACTS[1] not in cf
    assert cf.splitlines()[-1] == real.feedback.splitlines()[-1]  # same instruction, only the answer differs
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    assert env.counterfactual_feedback() is None


@pytest.mark.parametrize(
    "scores, critique",
    [
        ("0.25, 0.25, 0.25, 0.25", 1),  # unchanged
        ("0.1, 0.25, 0.25, 0.1", 1),  # vector changed, margin (0) unchanged
        ("0.3, 0.3, 0.3, 0.3", 1),
        ("0.2, 0.2, 0.4, 0.2", -1),  # margin rose after learning nothing
        ("0.5, 0.2, 0.2, 0.1", -1),
    ],
)
def test_bt_invariance_after_uninformative_feedback(scores, critique):
    env = make(Scripted([]))
    act(env, "Do you travel?")
    step = update(env, scores, counterfactual="<interact>0.9, 0, 0, 0</interact>")  # ignored here
    assert step.critique == critique and step.info["bt_rule"] == "invariance"


def test_bt_invariance_after_invalid_question_and_against_previous_valid_belief():
    env = make(Scripted([1]))
    act(env, "Do you have a fever?")
    update(env, "0.1, 0.1, 0.7, 0.1", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    asyncio.run(env.act("<interact></interact>"))
    assert update(env, "0.2, 0.2, 0.8, 0.2").critique == 1  # margin still 0.6
    assert env.proxies()["bt"] == [pytest.approx(0.6), pytest.approx(0.0)]


@pytest.mark.parametrize(
    "scores, cf, critique, rule",
    [
        ("0.1, 0.1, 0.7, 0.1", "<interact>0.25, 0.25, 0.25, 0.25</interact>", 1, "counterfactual"),  # moved, cf did not
        ("0.25, 0.25, 0.25, 0.25", "<interact>0.1, 0.1, 0.7, 0.1</interact>", -1, "counterfactual"),  # cf moved more
        ("0.1, 0.1, 0.7, 0.1", "<interact>0.7, 0.1, 0.1, 0.1</interact>", 1, "counterfactual"),  # equal distances: <=
        ("0.25, 0.25, 0.3, 0.25", "<scratch>x</scratch><answer>0.25, 0.25, 0.25, 0.26</answer>", 1, "counterfactual"),
        # additions to the paper's rule (env docstring): no move at all is 0, a move that does not raise the
        # gold margin is -1 however the counterfactual moved (the paper gave both +1)
        ("0.25, 0.25, 0.25, 0.25", "<interact>0.25, 0.25, 0.25, 0.25</interact>", 0, "unmoved"),
        ("0.3, 0.25, 0.25, 0.25", "<interact>0.25, 0.25, 0.25, 0.25</interact>", -1, "margin_not_raised"),
        ("0.35, 0.35, 0.35, 0.35", "<interact>0.25, 0.25, 0.25, 0.25</interact>", -1, "margin_not_raised"),
        ("0.9, 0.1, 0.1, 0.4", "<interact>0.25, 0.25, 0.25, 0.25</interact>", -1, "margin_not_raised"),
    ],
)
def test_bt_counterfactual_rule_after_informative_feedback(scores, cf, critique, rule):
    env = make(Scripted([1]))
    act(env, "Do you have a fever?")
    step = update(env, scores, counterfactual=cf)
    assert step.critique == critique and step.info["bt_rule"] == rule
    assert env.proxies()["cf_checks"] == 1.0


def test_a_missing_counterfactual_does_not_excuse_lowering_the_gold_margin():
    env = make(Scripted([1]))
    act(env, "Do you have a fever?")
    step = update(env, "0.7, 0.1, 0.1, 0.1", counterfactual="no tags")
    assert (step.critique, step.info["bt_rule"]) == (-1, "margin_not_raised") and env.proxies()["cf_missing"] == 1.0


@pytest.mark.parametrize(
    "cf", [None, "", "no tags", "<interact>0.5, 0.5</interact>", "<interact>2, 0, 0, 0</interact>"]
)
def test_bt_missing_or_unparseable_counterfactual_is_zero_and_counted(cf):
    env = make(Scripted([1]))
    act(env, "Do you have a fever?")
    step = update(env, "0.1, 0.1, 0.7, 0.1", counterfactual=cf)
    assert step.critique == 0 and step.info["bt_rule"] == "counterfactual_missing" and step.valid
    p = env.proxies()
    assert (p["cf_missing"], p["cf_checks"]) == (1.0, 0.0) and p["bt"] == [pytest.approx(0.6)]


@pytest.mark.parametrize("scores", ["0.1, 0.2, 0.3", "0.1, 0.2, 0.3, 1.5", "nan, 0, 0, 0", "A", ""])
def test_invalid_update_is_minus_one_and_keeps_previous_belief(scores):
    env = make(Scripted([1], []))
    act(env, "Do you have a fever?")
    update(env, "0.1, 0.1, 0.7, 0.1", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    act(env, "Do you travel?")
    step = update(env, scores)
    assert (step.critique, step.valid, step.info["bt_proxy"]) == (-1, False, 0.0)
    assert "previous valid scores are kept" in step.feedback
    assert env.proxies()["margin_belief"] == pytest.approx(0.6)


@pytest.mark.parametrize(
    "final, reward",
    [("0.1, 0.2, 0.6, 0.1", 1.0), ("0.6, 0.2, 0.1, 0.1", 0.0), ("0.4, 0.1, 0.4, 0.1", 0.0), ("1, 2, 3, 4", 0.0)],
)
def test_reward_is_unique_argmax_on_gold(final, reward):
    env = make(Scripted())
    step = env.answer(f"<answer>{final}</answer>")
    assert step.done and env.reward() == reward and env.phase == "done"
    assert step.critique == (0 if step.valid else -1)


def test_answer_in_update_round_is_scored_as_that_update():
    env = make(Scripted([]))
    act(env, "Do you travel?")
    step = env.answer("<answer>0.1, 0.1, 0.7, 0.1</answer>")
    assert step.critique == -1 and step.info["bt_rule"] == "invariance" and env.reward() == 1.0
    env = make(Scripted([1]))
    act(env, "Do you have a fever?")
    step = env.answer("<answer>0.1, 0.1, 0.7, 0.1</answer>")
    assert step.critique == 0 and step.info["bt_rule"] == "no_counterfactual"
    assert len(env.proxies()["bt"]) == 1


def test_turn_flow_final_answer_and_protocol_errors():
    env = make(Scripted([1], [], [4]))
    with pytest.raises(RuntimeError):
        update(env, "0.25, 0.25, 0.25, 0.25")
    for turn, q in enumerate(["Fever?", "Travel?", "Smoke?"]):
        act(env, q)
        with pytest.raises(RuntimeError):
            act(env, q)
        step = update(env, "0.2, 0.2, 0.4, 0.2", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
        assert (f"Turn {turn + 2} of 3" if turn < 2 else "<answer>") in step.feedback
    assert env.phase == "answer"
    step = env.answer("<answer>0.2, 0.2, 0.4, 0.2</answer>")
    assert step.done and step.critique == 0 and env.reward() == 1.0
    with pytest.raises(RuntimeError):
        env.answer("<answer>0.2, 0.2, 0.4, 0.2</answer>")
    p = env.proxies()
    assert p["as"] == [1, 0, 1] and p["bt"] == [pytest.approx(0.2), 0.0, 0.0]
    assert p["final_equals_first_guess"] == 1.0 and p["first_guess_correct"] == 1.0
    assert p["facts_revealed"] == 2.0 and p["fact_coverage"] == pytest.approx(2 / 5)
    assert p["user_calls"] == 3.0 and p["user_fallbacks"] == 0.0
    assert all(isinstance(v, float) for k, v in p.items() if k not in ("as", "bt"))


def test_feedback_ablation_hides_facts_but_keeps_critiques():
    env = make(Scripted([1]), feedback_ablation=True)
    step = act(env, "Do you have a fever?")
    assert "Unknown." in step.feedback and FACTS[1] not in step.feedback and step.critique == 1
    assert env.counterfactual_feedback() is not None and env.proxies()["as"] == [1]


def test_no_user_call_once_every_fact_is_out():
    user = Scripted([1, 2], [3, 4], [5])
    env = make(user)
    for q in ["a?", "b?", "c?"]:
        act(env, q)
        update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    assert env.phase == "answer" and len(user.requests) == 3
    env = MediQEnv("x", "q?", OPTIONS, 0, ["a"], known_fact_ids=[0], user=Scripted())
    step = act(env, "Anything?")
    assert step.critique == -1 and step.info["user_source"] == "none"


def test_make_env_builds_from_row_with_user_options():
    info = {
        "task": "mediq",
        "initial_info": "A 30-year-old woman comes to the clinic.",
        "question": "Which diagnosis?",
        "options": OPTIONS,
        "answer_idx": GOLD,
        "facts": FACTS,
        "known_fact_ids": np.array([0]),
        "max_turns": 8,
    }
    env = make_env("mediq", info, 0, user="offline", user_fact_threshold=0.9, feedback_ablation=False)
    assert isinstance(env, MediQEnv) and env.max_turns == 8 and env.user.fact_threshold == 0.9
    llm = make_env("mediq", info, 0, user="llm", user_url="http://127.0.0.1:9/v1", user_timeout=1)
    assert llm.user.config.timeout == 1.0
    with pytest.raises(TypeError):
        make_env("mediq", info, 0, user_colour="blue")
    with pytest.raises(ValueError):
        make_env("mediq", info, 0, user="oracle")


def _cf_env(**options):
    return make(counterfactual_as=True, **options)


@pytest.mark.parametrize(
    "counterfactual, critique, copied",
    [
        ("<interact>Do you have a fever?</interact>", -1, True),  # the same question whatever the belief
        ("<interact>Have you lost weight recently?</interact>", 1, False),  # the belief changed the question
    ],
)
def test_counterfactual_as_marks_belief_independent_questions(counterfactual, critique, copied):
    env = _cf_env(user=Scripted([1], [2]))  # both questions bring a new fact
    assert env.counterfactual_belief() is None  # no belief before the first question
    first = act(env, "Do you have a cough?")
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    assert env.counterfactual_belief() == "<interact>0.25, 0.25, 0.25, 0.25</interact>"
    step = asyncio.run(env.act("<interact>Do you have a fever?</interact>", counterfactual=counterfactual))
    assert step.info["belief_independent"] is copied and step.info["informative"]
    assert step.critique == critique
    assert env.proxies()["cf_as_belief_independent"] == float(copied)
    assert first.info["belief_independent"] is None  # first question: nothing to compare


def test_counterfactual_as_missing_or_garbage_is_counted_and_changes_nothing():
    for counterfactual in (None, "<interact></interact>", "\x00" * 50):
        env = _cf_env(user=Scripted([1], [2]))
        act(env, "Do you have a cough?")
        update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
        plain = make(user=Scripted([1], [2]))
        act(plain, "Do you have a cough?")
        update(plain, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
        step = asyncio.run(env.act("<interact>Do you have a fever?</interact>", counterfactual=counterfactual))
        reference = asyncio.run(plain.act("<interact>Do you have a fever?</interact>"))
        assert step.critique == reference.critique == 1
        assert env.proxies()["cf_as_missing"] == 1.0


def test_counterfactual_as_is_off_by_default():
    env = make()
    act(env, "Do you have a cough?")
    update(env, "0.25, 0.25, 0.25, 0.25", counterfactual="<interact>0.25, 0.25, 0.25, 0.25</interact>")
    assert env.counterfactual_belief() is None
