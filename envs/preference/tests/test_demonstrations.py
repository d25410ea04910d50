"""The scripted PE players behind the language-model lab's warm starts: each knob does what it says."""

import asyncio

import numpy as np
import pytest

from arew.audit.runner import play_scripted
from arew.envs.registry import demonstration_player, generate_rows, task_spec
from arew_preference.demonstrations import LOCKED_QUESTION, KnobPlayer

ROWS = generate_rows("pe-g-s2", {"train": 24}, 5)["train"]


def play(inform: float, update: float):
    """(mean reward, AS labels, BT labels, questions written) over the rows."""
    rewards, labels, questions = [], {"as": [], "bt": []}, []
    for i, info in enumerate(ROWS):
        env, log = asyncio.run(play_scripted("pe-g-s2", KnobPlayer(inform, update, i), info))
        rewards.append(env.reward())
        for channel, label, text in zip(log.channels, log.labels, log.texts):
            labels[channel].append(label)
            if channel == "as":
                questions.append(text)
    return float(np.mean(rewards)), labels, questions


def test_a_locked_player_asks_the_locked_question_and_never_updates():
    reward, labels, questions = play(0.0, 0.0)
    locked = f"{LOCKED_QUESTION[0] + 1}, {LOCKED_QUESTION[1] + 1} | 1, 2"
    assert all(locked in text for text in questions)
    assert set(labels["bt"]) == {0} and reward == 0.0
    assert labels["as"].count(-1) >= len(ROWS) * 9  # a repeat after the first turn, every episode


def test_a_competent_player_asks_informative_questions_and_wins_most_episodes():
    reward, labels, _ = play(1.0, 1.0)
    assert labels["as"].count(1) >= 0.8 * len(labels["as"])  # the rest: dominated pairs' fallback, a repeat
    assert reward >= 0.4  # 0.68 on 100 rows; the locked player's 0.07


def test_the_scratch_shows_the_work_each_competent_step_needs():
    """What a small model learns from: the scheduled pair's lines of the table as the prompt shows them, the sign of
    each score difference with its attribute's number, the question built from them (first attribute favours the
    first movie), and the update naming the weights it moves."""
    env, log = asyncio.run(play_scripted("pe-g-s2", KnobPlayer(1.0, 1.0, 0), ROWS[0]))
    questions = [text for channel, text in zip(log.channels, log.texts) if channel == "as"]
    updates = [text for channel, text in zip(log.channels, log.texts) if channel == "bt"]
    moved = 0
    for turn, (question, update, reply) in enumerate(zip(questions, updates, log.replies[::2])):
        first, second = turn % len(env.items), (turn + 1) % len(env.items)
        difference = env.items[first] - env.items[second]
        signs = ", ".join(f"{k}{'+' if x > 0 else '-' if x < 0 else '='}" for k, x in enumerate(difference, 1))
        table = env.initial_messages()[-1]["content"].splitlines()
        rows = [next(line for line in table if line.startswith(f"Movie {movie + 1}:")) for movie in (first, second)]
        assert question.startswith(f"<scratch>{rows[0]}\n{rows[1]}\nSign: {signs}</scratch>")
        if (difference > 0).any() and (difference < 0).any():
            up, down = int(np.argmax(difference > 0)), int(np.argmax(difference < 0))
            assert question.endswith(f"<interact>{first + 1}, {second + 1} | {up + 1}, {down + 1}</interact>")
            if "User: No" in reply:
                up, down = down, up
            if "User: Equal" not in reply:
                assert update.startswith(f"<scratch>{'yes' if 'User: Yes' in reply else 'no'}: {up + 1} up {down + 1} down</scratch>")
                moved += 1
    assert moved >= 5


def test_each_knob_alone_earns_no_reward():
    """Informative questions without updates, or updates after uninformative questions: the reward cannot tell
    the two failures apart, which is the self-locking the warm start is put in."""
    assert play(1.0, 0.0)[0] == 0.0
    assert play(0.0, 1.0)[0] == 0.0


def test_the_knobs_are_probabilities():
    with pytest.raises(ValueError, match="inform"):
        KnobPlayer(1.5, 0.0, 0)
    with pytest.raises(ValueError, match="update"):
        KnobPlayer(0.0, -0.1, 0)


def test_the_registry_hands_out_players_for_two_attribute_questions_only():
    """The update rule reads one attribute that favours the first movie and one that favours the second."""
    assert isinstance(demonstration_player("pe-g-s2", 0.5, 0.5, 0), KnobPlayer)
    assert task_spec("pe-g-s3").demonstrations == task_spec("pe-f-d6").demonstrations == ""
