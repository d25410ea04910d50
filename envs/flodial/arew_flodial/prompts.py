"""Texts shown to the agent in FloDial; kept apart from the rules so wording can change freely."""

from __future__ import annotations

from collections.abc import Sequence


def system_prompt(n_candidates: int, max_turns: int) -> str:
    scores = ", ".join(f"s{k}" for k in range(1, n_candidates + 1))
    return (
        "You are a troubleshooting assistant. A user describes a problem, and exactly one of "
        f"{n_candidates} candidate faults is its cause. Find it by asking the user yes/no questions "
        "about what they observe or can check. The user answers Yes or No when your question matches "
        "a check they know the answer to, and Unknown otherwise; asking about the same check again "
        "gets Unknown.\n\n"
        f"The session has {max_turns} turns. Each turn has two rounds:\n"
        "1. Question: ask the user one short yes/no question about one check.\n"
        f"2. Scores: state how likely each candidate fault is now, as {n_candidates} numbers between "
        "0 and 1 in candidate order.\n"
        "After the last turn you give your final scores; your answer is the candidate with the highest "
        f"score, which must be the only highest. Your starting scores are {1 / n_candidates:g} for every "
        "candidate. Unknown answers teach you nothing, so your scores should not change after them.\n\n"
        "Every message: brief reasoning inside <scratch>...</scratch>, then exactly one of:\n"
        "- question round: <interact>your yes/no question</interact>\n"
        f"- scores round: <interact>{scores}</interact> with {n_candidates} numbers between 0 and 1, "
        "comma separated.\n"
        f"- final answer: <answer>{scores}</answer>, same format.\n"
        "Writing <answer> at any point ends the session with those scores. Invalid output wastes the round."
    )


def task_text(problem: str, candidates: Sequence[str]) -> str:
    lines = [f"{k}. {text}" for k, text in enumerate(candidates, 1)]
    return f"Problem: {problem}\n\nCandidate faults:\n" + "\n".join(lines)


def query_instruction(turn: int, max_turns: int) -> str:
    """``turn`` is 0-based."""
    return f"Turn {turn + 1} of {max_turns}: ask the user one yes/no question in <interact>...</interact>."


def user_answer(word: str) -> str:
    return f"User: {word}."


def update_instruction(n_candidates: int) -> str:
    return f"Now state your updated scores for the {n_candidates} candidates in <interact>...</interact>."


def answer_instruction(n_candidates: int) -> str:
    return f"All turns are used. Give your final scores for the {n_candidates} candidates in <answer>...</answer>."


def final_turn_notice() -> str:
    return "\nThis was your last question: after these scores you must give your final answer in <answer>...</answer>."
