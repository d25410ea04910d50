"""The judge's prompts: a generic instruction plus, per task family, what a good action and a good belief update are.

The judge never sees the hidden truth (the preference vector, the gold option or fault, tau2's expected
actions) nor the rules' critiques: it judges from what the agent could see, as a reviewer reading the
transcript would. ``decision_messages`` asks about one decision (the transcript up to it, and the reply it
got); ``episode_messages`` numbers every decision of the episode and asks for one line each.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from arew.critiques.base import Decision, EpisodeContext

CHANNEL_WORDS = {"as": "an action (a question or a tool call)", "bt": "a belief update (the agent's current estimate)"}

SYSTEM = (
    "You judge the decisions of an agent in a multi-turn task where it must gather information before it "
    "answers. For the decision you are shown, say whether it helped (+1), did neither (0) or hurt (-1):\n"
    "- an action helps when it asks for or fetches information the agent does not have yet and that bears on "
    "the task, or fixes the problem; it hurts when it repeats an earlier action, asks for nothing useful, is "
    "malformed, or acts without the information it needs;\n"
    "- a belief update helps when it moves the estimate the way the latest reply supports and keeps what "
    "earlier replies established; it hurts when it ignores or contradicts the reply, or changes the estimate "
    "after a reply that said nothing.\n"
    "Say 0 when you cannot tell."
)

GUIDES = {
    "pe": (
        "The task: estimate a user's hidden preference weights over item attributes by asking which of two items "
        "the user prefers on chosen attributes. A comparison is informative only if neither item is better on "
        "every chosen attribute. After 'Yes' the first item scores higher on those attributes under the true "
        "weights, after 'No' the second; a good update shifts weight towards the attributes where the preferred "
        "item is stronger."
    ),
    "mediq": (
        "The task: a doctor asks a patient one atomic question per turn, then scores the four answer options. A "
        "good question asks for a fact not revealed yet that tells the options apart; 'Unknown' means the "
        "question brought nothing. A good update raises the options the new facts support and leaves the scores "
        "unchanged after 'Unknown'."
    ),
    "flodial": (
        "The task: troubleshoot a device by asking yes/no questions from a flowchart, then score the candidate "
        "faults. A good question is one the user can answer with Yes or No and that separates the candidates; "
        "'Unknown' means it matched no check. A good update moves the scores consistently with the answer and "
        "leaves them unchanged after 'Unknown'."
    ),
    "tau2": (
        "The task: a telecom support agent fixes a customer's phone problem with tools (and, in dual control, by "
        "asking the customer to look at or change the phone). A good action diagnoses before it repairs, reads "
        "what the next repair depends on, and makes a repair the diagnosis calls for; repeated calls, writes "
        "that change nothing, tool errors and malformed calls hurt."
    ),
}
TEMPLATES = ("auto", "generic", *GUIDES)

DECISION_ANSWER = "Answer with exactly two lines:\nCRITIQUE: +1, 0 or -1\nREASON: one short sentence"
EPISODE_ANSWER = "Answer with one line per decision, in order, each exactly:\nD<number>: +1, 0 or -1, then a short reason"


def task_family(task: str, template: str = "auto") -> str | None:
    """The guide a task gets: ``template`` itself, or (``auto``) the family its name starts with; None: generic."""
    if template == "generic":
        return None
    if template != "auto":
        return template
    for family in GUIDES:
        if task == family or task.startswith(f"{family}-"):
            return family
    return None


def system_prompt(task: str, template: str) -> str:
    family = task_family(task, template)
    return SYSTEM if family is None else f"{SYSTEM}\n\n{GUIDES[family]}"


# the answer's lines as the judge writes them (arew.critiques.judge reads replies with these)
_LABEL = r"(?P<label>[+]1|[-\u2212]1|1|0)(?![\d.])"  # +1, 1, 0, -1 (also the typographic minus); "+0"/"-0" are not labels
CRITIQUE_LINE = re.compile(rf"^[ \t*#>-]*critique[ \t]*[:=][ \t]*\**[ \t]*{_LABEL}\**[ \t]*(?P<rest>.*)$", re.I | re.M)
REASON_LINE = re.compile(r"^[ \t*#>-]*reason[ \t]*[:=][ \t]*\**[ \t]*(?P<reason>.+)$", re.I | re.M)
NUMBERED_LINE = re.compile(rf"^[ \t*#>-]*D[ \t]*(?P<index>\d{{1,4}})[ \t]*[:.)\]-][ \t]*\**[ \t]*{_LABEL}\**[ \t:,.;)\-\u2013\u2014]*(?P<reason>.*)$", re.I | re.M)
QUOTED = "[quoted] "


def quoted(text: str) -> str:
    """The transcript's text with every line that would read as an answer line marked as a quote.

    The agent writes (and a simulated user may repeat) whatever earns it +1: a decision ending in a line
    ``CRITIQUE: +1``, echoed by a judge before its own verdict, would make the reply name two labels, or one (the
    agent's) when the length cap cut the verdict. Marked, such a line no longer matches the answer's format,
    quoted or not; other text is shown as it is.
    """
    if not any(pattern.search(text) for pattern in (CRITIQUE_LINE, REASON_LINE, NUMBERED_LINE)):
        return text
    lines = text.split("\n")
    return "\n".join(QUOTED + line if any(p.match(line) for p in (CRITIQUE_LINE, REASON_LINE, NUMBERED_LINE)) else line for line in lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + " [...] " + text[-limit // 2 :]


def _turns(decisions: Sequence[Decision], numbered: bool) -> list[str]:
    lines = []
    for k, decision in enumerate(decisions, 1):
        tag = f"[agent, D{k}, {'action' if decision.channel == 'as' else 'belief update'}]" if numbered else "[agent]"
        lines.append(f"{tag} {quoted(decision.text.strip())}")
        if decision.reply is not None:
            lines.append(f"[environment] {quoted(decision.reply.strip())}")
    return lines


def _transcript(lines: list[str], budget: int) -> str:
    """The latest turns that fit ``budget`` characters, saying how many earlier ones were left out."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) > budget and kept:
            break
        kept.append(_clip(line, budget))
        used += len(line)
    dropped = len(lines) - len(kept)
    return "\n".join(([f"({dropped} earlier lines left out)"] if dropped else []) + kept[::-1]) or "(nothing yet)"


def opening(episode: EpisodeContext, budget: int) -> str:
    """The task as the agent got it: its first user message (the system prompt is the agent's, not the task's)."""
    users = [m.get("content", "") for m in episode.messages if m.get("role") == "user"]
    return _clip(quoted(str(users[0])) if users else "", budget)


def decision_messages(episode: EpisodeContext, index: int, template: str, context_chars: int) -> list[dict[str, str]]:
    """The request about decision ``index``: the task, the transcript before it, the decision and its reply."""
    decision = episode.decisions[index]
    user = (
        f"TASK:\n{opening(episode, context_chars // 3)}\n\n"
        f"CONVERSATION SO FAR:\n{_transcript(_turns(episode.decisions[:index], False), context_chars // 2)}\n\n"
        f"DECISION TO JUDGE ({CHANNEL_WORDS.get(decision.channel, decision.channel)}):\n{_clip(quoted(decision.text.strip()), context_chars // 6)}\n\n"
        f"THE REPLY IT GOT:\n{_clip(quoted(decision.reply.strip()), context_chars // 6) if decision.reply is not None else '(none)'}\n\n"
        f"{DECISION_ANSWER}"
    )
    return [{"role": "system", "content": system_prompt(episode.task, template)}, {"role": "user", "content": user}]


def episode_messages(episode: EpisodeContext, template: str, context_chars: int) -> list[dict[str, str]]:
    """The request about every decision at once, numbered D1, D2, ..."""
    user = (
        f"TASK:\n{opening(episode, context_chars // 3)}\n\n"
        f"CONVERSATION (the agent's decisions are numbered):\n{_transcript(_turns(episode.decisions, True), context_chars)}\n\n"
        f"Judge each of the {len(episode.decisions)} decisions D1 to D{len(episode.decisions)}. {EPISODE_ANSWER}"
    )
    return [{"role": "system", "content": system_prompt(episode.task, template)}, {"role": "user", "content": user}]
