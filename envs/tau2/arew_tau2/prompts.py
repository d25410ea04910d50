"""Texts shown to the agent in tau2 telecom; tau2's policy documents are inserted as data."""

from __future__ import annotations

CALL_EXAMPLE = '<interact>{"name": "get_customer_by_phone", "arguments": {"phone_number": "555-000-0000"}}</interact>'


def _common(max_turns: int) -> str:
    return (
        f"You have {max_turns} turns. Every message: brief reasoning inside <scratch>...</scratch>, then "
        "exactly one payload.\n"
        f"- A tool call is one JSON object in <interact>, e.g. {CALL_EXAMPLE}\n"
        "  Use only the tools listed below, with exactly their argument names.\n"
    )


def system_prompt_solo(policy: str, tools_text: str, max_turns: int) -> str:
    return (
        "You are a technical-support agent of a mobile phone company, working a support ticket alone. "
        "You can reach the company's systems (customers, lines, plans, bills) and, remotely, the "
        "customer's phone; nobody else will act or answer. Follow the policy below.\n\n"
        + _common(max_turns)
        + "- Each turn is one tool call; you then see its output.\n"
        "- When the ticket is resolved, or the policy allows nothing more, end with "
        "<answer>a one-line summary</answer>. <answer> at any point ends the ticket.\n"
        "A malformed call, an unknown tool, a failing call, a call repeated with nothing changed "
        "since, or a change that changes nothing wastes the turn.\n\n"
        f"<policy>\n{policy}\n</policy>\n\n"
        f"Tools, as name(arguments): purpose.\n{tools_text}"
    )


def system_prompt_dual(policy: str, tools_text: str, max_turns: int) -> str:
    return (
        "You are a technical-support agent of a mobile phone company, on a call with a customer. "
        "You can reach the company's systems (customers, lines, plans, bills); only the customer can "
        "operate their phone, so ask them to do things on it and to tell you what they see. Follow "
        "the policy below.\n\n"
        + _common(max_turns)
        + "- Anything else in <interact> is a message to the customer, e.g. "
        "<interact>Could you tell me the phone number on your account?</interact>\n"
        "- When the issue is resolved, or the policy allows nothing more, end the call with "
        "<answer>your closing words to the customer</answer>. <answer> at any point ends the call; "
        "the customer may also end it.\n"
        "A malformed call, an unknown tool, a failing call, a call repeated with nothing changed "
        "since, a change that changes nothing, or a message repeated without new result wastes "
        "the turn.\n\n"
        f"<policy>\n{policy}\n</policy>\n\n"
        f"Your tools, as name(arguments): purpose.\n{tools_text}"
    )


def tools_text(agent_tools: str, phone_tools: str | None) -> str:
    if phone_tools is None:
        return agent_tools
    return f"Company systems:\n{agent_tools}\nThe customer's phone:\n{phone_tools}"


def opening_solo(ticket: str) -> str:
    return f"Ticket:\n{ticket}"


def opening_dual() -> str:
    return "A customer is on the line."


def next_instruction(turn: int, max_turns: int, solo: bool) -> str:
    """``turn`` is the number of the coming turn (1-based); empty after the last."""
    if turn > max_turns:
        return ""
    if turn == 1:
        what = "make your first tool call" if solo else "greet the customer"
    else:
        what = "make your next tool call" if solo else "make a tool call or write to the customer"
    return f"Turn {turn} of {max_turns}: {what} in <interact>...</interact>, or end with <answer>...</answer>."


def tool_output(name: str, output: str, error: bool) -> str:
    return f"{'Error from' if error else 'Output of'} {name}: {output}"


def customer_reply(text: str, ended: bool) -> str:
    return f"Customer: {text}" + ("\n(The customer has ended the call.)" if ended else "")


def invalid(reason: str) -> str:
    return f"Your turn was invalid because {reason}. Nothing was done."


def answer_recorded(solo: bool) -> str:
    return "Ticket closed." if solo else "Call ended."


def answer_invalid(reason: str) -> str:
    return f"Your final message was invalid because {reason}. The episode is over."


def final_turn_notice() -> str:
    return "\nThat was your last turn: end now with <answer>...</answer>."
