"""What the LLM user is asked. The reply format asked for is one strict line, restated at the end
of the request; :func:`arew.envs.parsing.parse_selection` also reads the unambiguous ways real models
stray from it (an explanation after the line, numbered lines quoting the items). The numbers
shown are 1-based."""

from __future__ import annotations

from arew.envs.users.base import FactRequest, RowRequest, UserRequest

FACT_LABEL = "FACTS"
ROW_LABEL = "ROW"

PATIENT_SYSTEM = (
    "You play a patient who is being asked one question by a doctor. You know only the numbered "
    "facts you are given, which are true about you. Pick the facts that directly answer the "
    "doctor's question, at most {max_facts} of them, the most relevant first. A fact that is only "
    "on a related topic does not count. Never invent facts.\n"
    "Reply with exactly one line and nothing else, in this format:\n"
    f"{FACT_LABEL}: <fact numbers separated by commas>\n"
    "or, if none of the facts answers the question:\n"
    f"{FACT_LABEL}: NONE"
)

TROUBLESHOOT_SYSTEM = (
    "You play a user who is troubleshooting a problem with the help of an assistant. The assistant "
    "asks you one yes/no question. You are given a numbered table of checks whose answers you know. "
    "Decide which single row of the table asks about the same check as the assistant's question, "
    "even if it is worded differently. A row about a different part, symptom or test does not "
    "count.\n"
    "Reply with exactly one line and nothing else, in this format:\n"
    f"{ROW_LABEL}: <row number>\n"
    "or, if no row asks about the same check:\n"
    f"{ROW_LABEL}: NONE"
)


# the format again at the end of the request, where small models still read it (benchmarks/user_parse_rates.py,
# SmolLM2-135M-Instruct: a readable FloDial reply in 10 of 40 requests with it, 9 of them NONE, in 0 without it;
# MediQ 2 of 40 with it, 0 without)
PATIENT_REMINDER = f"Reply with one line: {FACT_LABEL}: <fact numbers> or {FACT_LABEL}: NONE"
TROUBLESHOOT_REMINDER = f"Reply with one line: {ROW_LABEL}: <row number> or {ROW_LABEL}: NONE"


def messages(request: UserRequest) -> list[dict[str, str]]:
    """Chat messages for one request."""
    if isinstance(request, FactRequest):
        lines = "\n".join(f"{i + 1}. {request.facts[i]}" for i in request.candidates)
        return [
            {"role": "system", "content": PATIENT_SYSTEM.format(max_facts=request.max_facts)},
            {
                "role": "user",
                "content": f"Facts:\n{lines or '(none)'}\n\nDoctor's question: {request.question}\n\n{PATIENT_REMINDER}",
            },
        ]
    if isinstance(request, RowRequest):
        lines = "\n".join(f"{i}. {row}" for i, row in enumerate(request.rows, 1))
        problem = f"Your problem: {request.problem}\n" if request.problem else ""
        return [
            {"role": "system", "content": TROUBLESHOOT_SYSTEM},
            {
                "role": "user",
                "content": f"{problem}Table:\n{lines}\n\nAssistant's question: {request.question}\n\n{TROUBLESHOOT_REMINDER}",
            },
        ]
    raise TypeError(f"unknown request type {type(request).__name__}")


def choice_texts(request: UserRequest) -> dict[int, str]:
    """The text shown under each 1-based number (what a reply that lists items must quote)."""
    if isinstance(request, FactRequest):
        return {i + 1: request.facts[i] for i in request.candidates if 0 <= i < len(request.facts)}
    return dict(enumerate(request.rows, 1))


def label_and_choices(request: UserRequest) -> tuple[str, tuple[int, ...], int]:
    """(reply label, the 1-based numbers the reply may name, how many at most)."""
    if isinstance(request, FactRequest):
        return FACT_LABEL, tuple(i + 1 for i in request.candidates), request.max_facts
    return ROW_LABEL, tuple(range(1, len(request.rows) + 1)), 1
