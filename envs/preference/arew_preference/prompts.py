"""Texts shown to the agent in PE; kept apart from the rules so wording can change freely."""

from __future__ import annotations

from collections.abc import Sequence


def _query_format(subset_size: int, n_attrs: int) -> str:
    if subset_size < n_attrs:
        attrs = ", ".join(f"k{m}" for m in range(1, subset_size + 1))
        example_attrs = ", ".join(str(1 + m * n_attrs // subset_size) for m in range(subset_size))
        return (
            f"<interact>i, j | {attrs}</interact> asks: does the user prefer movie i to movie j "
            f"when only attributes {attrs} count? Name two different movies and exactly "
            f"{subset_size} different attributes, e.g. <interact>3, 7 | {example_attrs}</interact>."
        )
    return (
        "<interact>i, j</interact> asks: does the user prefer movie i to movie j, all "
        "attributes counted? Name two different movies, e.g. <interact>3, 7</interact>."
    )


def system_prompt(n_items: int, attribute_names: Sequence[str], subset_size: int, max_turns: int) -> str:
    n_attrs = len(attribute_names)
    scope = f"a set of {subset_size} attributes you choose" if subset_size < n_attrs else "all attributes"
    weights = ", ".join(f"w{k}" for k in range(1, n_attrs + 1))
    return (
        "You are estimating a user's hidden movie preferences by asking comparison questions.\n"
        f"There are {n_items} movies, each scored 1-5 on {n_attrs} attributes. The user has a "
        f"hidden weight between 0 and 1 for each attribute. The user's score of a movie on a set "
        "of attributes is the weighted sum of the movie's scores on those attributes.\n\n"
        f"The game has {max_turns} turns. Each turn has two rounds:\n"
        f"1. Question: pick two movies and ask which one the user prefers on {scope}. The user "
        "answers Yes (the first movie scores higher), No (lower) or Equal.\n"
        "2. Estimate: state your current estimate of all weights.\n"
        "After the last turn you give your final estimate, which is judged by its cosine "
        "similarity to the hidden weights (only their relative sizes matter). Your starting "
        "estimate is 0.5 for every attribute. Questions whose answer you can predict from "
        "the scores alone (one movie at least as good on every counted attribute) and "
        "repeated questions teach you nothing.\n\n"
        "Every message: brief reasoning inside <scratch>...</scratch>, then exactly one of:\n"
        f"- question round: {_query_format(subset_size, n_attrs)}\n"
        f"- estimate round: <interact>{weights}</interact> with {n_attrs} numbers between 0 and 1, "
        "comma separated.\n"
        f"- final estimate: <answer>{weights}</answer>, same format.\n"
        "Movie and attribute numbers start at 1. Writing <answer> at any point ends the game "
        "with that estimate. Invalid output wastes the round."
    )


def item_row(number: int, scores: Sequence[int]) -> str:
    """One line of the score table (``number`` from 1), as the agent sees it."""
    return f"Movie {number}: " + ", ".join(str(int(s)) for s in scores)


def item_table(items: Sequence[Sequence[int]], attribute_names: Sequence[str]) -> str:
    header = "Attributes: " + ", ".join(f"{k} = {name}" for k, name in enumerate(attribute_names, 1))
    rows = [item_row(i, row) for i, row in enumerate(items, 1)]
    return header + "\nScores (in attribute order):\n" + "\n".join(rows)


def query_instruction(turn: int, max_turns: int) -> str:
    """``turn`` is 0-based."""
    return f"Turn {turn + 1} of {max_turns}: ask your question in <interact>...</interact>."


def update_instruction() -> str:
    return "Now state your updated estimate of all weights in <interact>...</interact>."


def answer_instruction() -> str:
    return "All turns are used. Give your final estimate of all weights in <answer>...</answer>."


def final_turn_notice() -> str:
    return (
        "\nThis was your last question: after this estimate you must give your final "
        "estimate in <answer>...</answer>."
    )
