"""Texts shown to the agent in MediQ; kept apart from the rules so wording can change freely."""

from __future__ import annotations

from collections.abc import Sequence

LETTERS = ("A", "B", "C", "D")
UNKNOWN = "Unknown."


def system_prompt(max_turns: int) -> str:
    return (
        "You are a doctor answering a multiple-choice medical question about a patient. At first you "
        "know only the patient's opening complaint; ask the patient questions to learn more. The "
        "patient answers with what they know, at most two facts per question, and says Unknown when "
        "they cannot answer. Facts already told are not told again.\n\n"
        f"The consultation has {max_turns} turns. Each turn has two rounds:\n"
        "1. Question: ask the patient one short, specific question about one thing.\n"
        "2. Scores: state how likely each option A, B, C, D is now, as four numbers between 0 and 1.\n"
        "After the last turn you give your final scores; your answer is the option with the highest "
        "score, which must be the only highest. Your starting scores are 0.25 for every option. "
        "Repeated questions and questions the patient cannot answer teach you nothing, and scores "
        "should change only when you learn something.\n\n"
        "Every message: brief reasoning inside <scratch>...</scratch>, then exactly one of:\n"
        "- question round: <interact>your question to the patient</interact>\n"
        "- scores round: <interact>a, b, c, d</interact> with four numbers between 0 and 1 for options "
        "A, B, C, D, comma separated, e.g. <interact>0.1, 0.6, 0.2, 0.1</interact>.\n"
        "- final answer: <answer>a, b, c, d</answer>, same format.\n"
        "Writing <answer> at any point ends the consultation with those scores. Invalid output "
        "wastes the round."
    )


def case_text(initial_info: str, question: str, options: Sequence[str]) -> str:
    lines = [f"{letter}. {text}" for letter, text in zip(LETTERS, options, strict=False)]
    return f"Patient: {initial_info}\n\nQuestion: {question}\nOptions:\n" + "\n".join(lines)


def query_instruction(turn: int, max_turns: int) -> str:
    """``turn`` is 0-based."""
    return f"Turn {turn + 1} of {max_turns}: ask the patient one question in <interact>...</interact>."


def patient_answer(facts: Sequence[str]) -> str:
    return "Patient's answer: " + (" ".join(facts) if facts else UNKNOWN)


def update_instruction() -> str:
    return "Now state your updated scores for options A, B, C, D in <interact>...</interact>."


def answer_instruction() -> str:
    return "All turns are used. Give your final scores for options A, B, C, D in <answer>...</answer>."


def final_turn_notice() -> str:
    return "\nThis was your last question: after these scores you must give your final answer in <answer>...</answer>."
