"""What the agent reads; kept apart from the rules so the wording can change freely."""

from __future__ import annotations


def system_prompt(n_candidates: int, max_turns: int) -> str:
    scores = ", ".join(f"s{k}" for k in range(1, n_candidates + 1))
    return (
        f"A secret number lies between 1 and {n_candidates}. Find it by asking questions of the form "
        "'is it at most k?'; the user answers Yes or No truthfully.\n\n"
        f"The session has {max_turns} turns. Each turn has two rounds:\n"
        f"1. Question: one whole number k between 1 and {n_candidates - 1}.\n"
        f"2. Scores: how likely each number is now, as {n_candidates} numbers between 0 and 1 "
        "in order from 1 upwards.\n"
        "After the last turn you give your final scores; your answer is the number with the highest "
        f"score, which must be the only highest. Your starting scores are {1 / n_candidates:g} for every number.\n\n"
        "Every message: brief reasoning inside <scratch>...</scratch>, then exactly one of:\n"
        "- question round: <interact>Is it at most k?</interact>\n"
        f"- scores round: <interact>{scores}</interact>, comma separated.\n"
        f"- final answer: <answer>{scores}</answer>, same format.\n"
        "Writing <answer> at any point ends the session with those scores. Invalid output wastes the round."
    )


def opening(n_candidates: int) -> str:
    return f"The secret number is one of 1 to {n_candidates}."


def query_instruction(turn: int, max_turns: int) -> str:
    """``turn`` is 0-based."""
    return f"Turn {turn + 1} of {max_turns}: ask 'Is it at most k?' in <interact>...</interact>."


def user_answer(word: str) -> str:
    return f"User: {word}."


def update_instruction() -> str:
    return "Now state your updated scores in <interact>...</interact>."


def answer_instruction() -> str:
    return "All turns are used. Give your final scores in <answer>...</answer>."


def final_turn_notice() -> str:
    return "\nThis was your last question: after these scores you must give your final answer in <answer>...</answer>."
