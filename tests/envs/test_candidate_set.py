"""The candidate-set belief of the task SDK (``arew.envs.beliefs.CandidateSetEnv``), on a tiny twenty-questions task
written here on the public SDK as a user writes one (no underscored name from ``arew``).

Six animals; a question names a trait and the user answers Yes or No for the secret animal, which rules out every
animal that would have answered otherwise. Scripted episodes check that tracking the answers earns every +1, that
each shortcut a trained policy could take (guessing, keeping one guessed candidate, restating every candidate,
trickling the news out, undoing an answer) earns less, that invalid lists cost the round, and the reward and
proxies; Hypothesis checks that no update earns more than the set of candidates the answers allow.
"""

from __future__ import annotations

import asyncio
import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arew.envs.beliefs import CandidateSetEnv
from arew.envs.parsing import ParseResult, parse_index_set

ANIMALS = ("eagle", "penguin", "shark", "dolphin", "bat", "frog")  # shown as 1-6
TRAITS = {  # the animals that have each trait
    "fly": {"eagle", "bat"},
    "swim": {"penguin", "shark", "dolphin", "frog"},
    "mammal": {"dolphin", "bat"},
    "feathers": {"eagle", "penguin"},
}


class Prompts:
    """The wording (``arew.envs.beliefs.BeliefPrompts``)."""

    @staticmethod
    def query_instruction(turn: int, max_turns: int) -> str:
        return f"Turn {turn + 1} of {max_turns}: name one trait in <interact>...</interact>."

    @staticmethod
    def update_instruction() -> str:
        return "List the numbers of the animals still possible in <interact>...</interact>."

    @staticmethod
    def answer_instruction() -> str:
        return "Name the animal's number in <answer>...</answer>."

    @staticmethod
    def final_turn_notice() -> str:
        return "\nThat was your last question."


def parse_trait(payload: str) -> ParseResult:
    trait = payload.strip().lower()
    if trait not in TRAITS:
        return ParseResult.failure(f"ask about one of {', '.join(TRAITS)}")
    return ParseResult.success(trait)


class TwentyQuestionsEnv(CandidateSetEnv):
    prompts = Prompts
    INVALID_FINAL = "Your final answer was invalid because {}. The game is over."
    INVALID_QUESTION = "Your question was invalid because {}. Nobody answered."

    def __init__(self, secret: str, max_turns: int = 4):
        super().__init__(max_turns, len(ANIMALS), ANIMALS.index(secret))

    @classmethod
    def from_row(cls, extra_info, seed, **options):
        return cls(extra_info["secret"], int(extra_info.get("max_turns", 4)))

    @property
    def system_prompt(self) -> str:
        return "Find the secret animal by asking about its traits; keep the list of animals still possible."

    def opening(self) -> str:
        return "The animals: " + ", ".join(f"{number}. {animal}" for number, animal in enumerate(ANIMALS, 1))

    async def act(self, text, counterfactual=None):
        question = self.open_turn(text, parse_trait)
        if not question.ok:
            return self.invalid_question(question.error)
        holders = TRAITS[question.value]
        yes = ANIMALS[self.gold] in holders
        ruled_out = {i for i, animal in enumerate(ANIMALS) if (animal in holders) != yes}
        return self.elimination_step(f"User: {'Yes' if yes else 'No'}.", ruled_out, trait=question.value)

    def proxies(self):
        return {**self.episode_proxies(), **self.candidate_proxies()}


def game(secret: str = "dolphin", max_turns: int = 4) -> TwentyQuestionsEnv:
    return TwentyQuestionsEnv.from_row({"secret": secret, "max_turns": max_turns}, seed=0)


def ask(env, trait: str):
    return asyncio.run(env.act(f"<scratch>.</scratch><interact>{trait}</interact>"))


def state(env, numbers: str):
    """The update round: the candidates the agent still holds, as it writes them (1-based)."""
    return env.update(f"<scratch>.</scratch><interact>{numbers}</interact>")


def judged(step) -> tuple[int, str]:
    return step.critique, step.info["bt_rule"]


def play(env, turns) -> list[int]:
    """Ask each (trait, update) pair's trait and state its update: the updates' critiques."""
    critiques = []
    for trait, update in turns:
        ask(env, trait)
        critiques.append(state(env, update).critique)
    return critiques


def numbers(candidates) -> str:
    return ", ".join(str(i + 1) for i in sorted(candidates))


def psi(candidates, gold: int) -> float:
    """The belief's mass on the gold, uniform over the candidates held."""
    return float(gold in candidates) / len(candidates)


# With the dolphin (4) secret: fly -> No rules out 1 and 5; swim -> Yes then rules out nothing new;
# feathers -> No rules out 2; mammal -> Yes rules out 3 and 6.


def test_tracking_the_answers_earns_every_positive_critique_and_the_reward():
    env = game()
    assert env.candidate_set == set(range(6)) and env.informative is False
    question = ask(env, "fly")
    assert (question.critique, question.info["as_proxy"], question.feedback.split("\n")[0]) == (1, 2, "User: No.")
    assert env.ruled_out == {0, 4} and env.consistent == {1, 2, 3, 5} and env.informative
    assert judged(state(env, "2, 3, 4, 6")) == (1, "follows_answers")
    assert env.candidate_set == {1, 2, 3, 5} and not env.informative
    assert ask(env, "swim").critique == -1  # every animal still possible swims: no news
    assert judged(state(env, "2, 3, 4, 6")) == (0, "unchanged")
    assert ask(env, "feathers").critique == 1
    assert judged(state(env, "[3, 4, 6]")) == (1, "follows_answers")
    assert ask(env, "mammal").critique == 1
    assert judged(state(env, "4")) == (1, "follows_answers")
    final = env.answer("<answer>4</answer>")
    assert (final.critique, final.done, final.valid, env.reward(), env.final_answer) == (0, True, True, 1.0, 3)
    p = env.proxies()
    assert p["as"] == [2, 0, 1, 2] and p["bt"] == pytest.approx([1 / 4 - 1 / 6, 0, 1 / 3 - 1 / 4, 1 - 1 / 3])
    assert p["c_bt"] == pytest.approx(1 - 1 / 6)  # the mass gathered on the truth, from 1/n to 1
    assert (p["belief_correct"], p["first_guess_correct"], p["final_equals_first_guess"]) == (1.0, 0.0, 0.0)
    assert (p["n_consistent"], p["answer_consistent"], p["answered"], p["n_invalid"]) == (1.0, 1.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        ("2, 3, 6", (-1, "left_out_gold")),  # a guess that drops the secret
        ("3, 4, 6", (-1, "left_out_consistent")),  # a guess that drops an animal no answer ruled out, secret kept
        ("4", (-1, "left_out_consistent")),  # keeping one guessed animal, even the right one
        ("3", (-1, "left_out_gold")),  # keeping one guessed animal, a wrong one
        ("1, 2, 3, 4, 5, 6", (-1, "ignored_answer")),  # restating every animal
        ("2, 3, 4, 5, 6", (0, "partial")),  # only part of the news
    ],
    ids=["drop_gold", "drop_consistent", "lucky_singleton", "wrong_singleton", "restate_all", "partial"],
)
def test_after_news_every_shortcut_earns_less_than_tracking(update, expected):
    env = game()
    ask(env, "fly")  # rules out 1 and 5
    step = state(env, update)
    assert judged(step) == expected and step.valid


def test_a_guess_keeps_costing_until_it_is_put_back():
    env = game()
    ask(env, "fly")
    assert judged(state(env, "2, 4, 6")) == (-1, "left_out_consistent")  # shark (3) guessed away
    ask(env, "feathers")  # rules out 2
    assert judged(state(env, "4, 6")) == (-1, "left_out_consistent")  # follows the answer, still without the shark
    ask(env, "swim")
    assert judged(state(env, "3, 4, 6")) == (0, "restored")
    ask(env, "mammal")
    assert judged(state(env, "4")) == (1, "follows_answers")
    # Def. 3.2 sums progress only: the guess's gain on the truth counts, its undoing does not (1 - 1/6 without it)
    assert env.proxies()["c_bt"] == pytest.approx(1.0)


def test_dropping_the_gold_and_putting_it_back_never_pays():
    env = game()
    ask(env, "fly")
    assert judged(state(env, "2, 3, 6")) == (-1, "left_out_gold")
    ask(env, "swim")
    assert judged(state(env, "2, 3, 6")) == (-1, "left_out_gold")  # every update that leaves the gold out
    ask(env, "feathers")
    assert judged(state(env, "3, 4, 6")) == (1, "follows_answers")  # back, and the news taken: the set is exact
    assert env.proxies()["bt"] == pytest.approx([-1 / 6, 0.0, 1 / 3])


def test_ignoring_or_undoing_an_answer_is_critiqued():
    env = game()
    ask(env, "fly")
    assert judged(state(env, "1, 2, 3, 4, 5, 6")) == (-1, "ignored_answer")
    ask(env, "swim")  # no news now, but 1 and 5 are still held: catching up is an update that follows the answers
    assert judged(state(env, "2, 3, 4, 6")) == (1, "follows_answers")
    ask(env, "swim")
    assert judged(state(env, "1, 2, 3, 4, 6")) == (-1, "readded_ruled_out")  # the eagle was ruled out


def test_trickling_the_news_out_earns_less_than_taking_it_at_once():
    """Dropping one ruled-out animal per update is partial credit (0) while others stay, never a +1 per drop."""
    traits = ("fly", "feathers", "mammal", "swim")  # 1 and 5 out; 2 out; 3 and 6 out; nothing new
    assert play(game(), zip(traits, ["2, 3, 4, 6", "3, 4, 6", "4", "4"])) == [1, 1, 1, 0]
    assert play(game(), zip(traits, ["2, 3, 4, 5, 6", "3, 4, 5, 6", "4, 5, 6", "4, 6"])) == [0, 0, 0, 0]
    # keeping the latest news while catching up on older news ignores the latest answer
    assert play(game(), zip(traits[:2], ["2, 3, 4, 5, 6", "2, 3, 4, 6"])) == [0, -1]


def test_nothing_to_respond_to_and_a_set_unchanged_earns_nothing():
    env = game()
    ask(env, "swim")  # the dolphin swims: rules out 1 and 5
    assert judged(state(env, "2, 3, 4, 6")) == (1, "follows_answers")
    ask(env, "fly")  # nothing new: 1 and 5 are already ruled out
    assert env.informative is False
    assert judged(state(env, "2, 3, 4, 6")) == (0, "unchanged")
    ask(env, "bark")  # an invalid question rules nothing out
    assert judged(state(env, "2, 3, 4, 6")) == (0, "unchanged")


@pytest.mark.parametrize(
    ("update", "error"),
    [
        ("", "no candidate numbers were given"),
        ("2, 2, 4", "candidate numbers must be distinct"),
        ("2, 7", "candidate numbers must be between 1 and 6; got [7]"),
        ("0, 2", "candidate numbers must be between 1 and 6; got [0]"),
        ("two, four", "candidate numbers must be whole numbers, got 'two'"),
        ("2.0, 4", "candidate numbers must be whole numbers, got '2.0'"),
        ("1-3", "candidate numbers must be whole numbers, got '1-3'"),
        ("1 2 3 4 5 6 1", "7 candidate numbers were given, but there are only 6 candidates"),
    ],
)
def test_an_invalid_list_costs_the_round_says_why_and_keeps_the_previous_set(update, error):
    env = game()
    ask(env, "fly")
    step = state(env, update)
    assert (step.critique, step.valid, step.info["bt_rule"], step.info["error"]) == (-1, False, "invalid", error)
    assert step.feedback.startswith(f"Your list of candidates was invalid because {error}.")
    assert env.candidate_set == set(range(6)) and env.proxies()["n_invalid"] == 1.0
    ask(env, "swim")
    assert judged(state(env, "2, 3, 4, 6")) == (1, "follows_answers")  # judged against the last valid set


@pytest.mark.parametrize(
    ("answer", "reward", "valid"),
    [("4", 1.0, True), ("[4]", 1.0, True), ("3", 0.0, True), ("3, 4", 0.0, False), ("dolphin", 0.0, False)],
)
def test_the_answer_is_one_candidate_and_the_reward_is_whether_it_is_the_gold(answer, reward, valid):
    env = game(max_turns=1)
    ask(env, "fly")
    state(env, "2, 3, 4, 6")
    final = env.answer(f"<answer>{answer}</answer>")
    assert (final.valid, final.done, env.reward(), final.critique) == (valid, True, reward, 0 if valid else -1)
    p = env.proxies()
    assert (p["answered"], p["answer_consistent"], p["belief_correct"]) == (float(valid), float(valid), reward)
    if answer == "3, 4":
        assert "the final answer must name exactly one candidate, not 2" in final.feedback


def test_an_answer_in_place_of_an_update_is_judged_as_the_set_it_names():
    guessed, identified = game(), game()
    ask(guessed, "fly")
    step = guessed.answer("<answer>4</answer>")
    assert judged(step) == (-1, "left_out_consistent") and guessed.reward() == 1.0  # a lucky guess: the reward pays it
    for trait, update in (("fly", "2, 3, 4, 6"), ("feathers", "3, 4, 6")):
        ask(identified, trait)
        state(identified, update)
    ask(identified, "mammal")
    assert judged(identified.answer("<answer>4</answer>")) == (1, "follows_answers") and identified.reward() == 1.0
    proxies = identified.proxies()
    assert proxies["bt"][-1] == pytest.approx(1 - 1 / 3) and proxies["bt_final"] == 0.0


def test_a_wrong_answer_tells_a_failure_to_ask_from_a_failure_to_track():
    asked_too_little, tracked_badly = game(max_turns=1), game(max_turns=1)
    for env, answer in ((asked_too_little, "2"), (tracked_badly, "1")):
        ask(env, "fly")
        state(env, "2, 3, 4, 6")
        env.answer(f"<answer>{answer}</answer>")
        assert env.reward() == 0.0 and env.proxies()["n_consistent"] == 4.0
    assert asked_too_little.proxies()["answer_consistent"] == 1.0 and tracked_badly.proxies()["answer_consistent"] == 0.0


def test_an_answer_that_rules_out_the_gold_is_a_bug_of_the_task():
    env = game()
    env.open_turn("<interact>fly</interact>", parse_trait)
    with pytest.raises(ValueError, match="cannot rule out the gold"):
        env.elimination_step("User: No.", {env.gold})
    with pytest.raises(ValueError, match="below 6"):
        env.elimination_step("User: No.", {6})


def test_the_task_may_give_its_own_question_critique():
    env = game()
    env.open_turn("<interact>swim</interact>", parse_trait)
    step = env.elimination_step("User: Yes.", {0, 4}, critique=0, trait="swim")
    assert (step.critique, step.info["as_proxy"], step.info["trait"], env.informative) == (0, 2, "swim", True)


def test_parse_index_set():
    assert parse_index_set(" (1, 3 4) ", 4).value == {0, 2, 3}
    assert parse_index_set("2", 2, what="fault").value == {1}
    assert parse_index_set("3", 2, what="fault").error == "fault numbers must be between 1 and 2; got [3]"
    assert not parse_index_set(None, 4).ok and not parse_index_set("1" * 20_000, 4).ok


GOLDS = st.integers(0, len(ANIMALS) - 1)
SETS = st.frozensets(st.integers(0, len(ANIMALS) - 1), min_size=1)
TURNS = st.lists(st.tuples(st.sampled_from(sorted(TRAITS)), SETS), max_size=3)


@settings(max_examples=300, deadline=None)
@given(GOLDS, TURNS, st.sampled_from(sorted(TRAITS)), SETS)
def test_no_update_earns_more_than_the_set_the_answers_allow(gold, history, trait, update):
    """From any state an episode reaches, stating exactly the candidates consistent with the answers earns the
    most; an update earns +1 only by stating that set, so never without the gold."""
    env = game(ANIMALS[gold])
    for asked, held in history:
        ask(env, asked)
        state(env, numbers(held))
    ask(env, trait)
    before, tracking = env.candidate_set, copy.deepcopy(env)
    step, exact = state(env, numbers(update)), state(tracking, numbers(tracking.consistent))
    assert step.critique <= exact.critique and exact.critique >= 0
    if step.critique == 1:
        assert update == env.consistent and gold in update
    if gold not in update:
        assert judged(step) == (-1, "left_out_gold")
    assert step.info["bt_proxy"] == pytest.approx(psi(update, gold) - psi(before, gold))
