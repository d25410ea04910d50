"""Parsing of agent text: the only place that reads what the policy wrote.

Every function here takes arbitrary input (any object, any length, any unicode) and
returns a :class:`ParseResult`; none raises on bad text, because a malformed turn must
become a -1 critique and an explanatory message, never a crashed rollout.

Tag rule (chosen to make the protocol unambiguous for both agent and critique): a turn
carries exactly one payload, ``<tag>...</tag>``, with lower-case tag names and no spaces
or attributes inside the angle brackets. The text must contain exactly one opening and
exactly one closing tag of that name, in that order, and no tag of another payload kind
(:data:`PAYLOAD_TAGS`). Free text, including ``<scratch>...</scratch>``, may surround the
payload; scratch is recommended by the prompts but not required.

Numbers are plain ASCII decimals (``0.25``, ``.5``, ``1``, ``3e-1``) separated by commas
and/or whitespace, optionally wrapped in one pair of ``[]`` or ``()``. NaN, infinities,
unicode digits and thousands separators are rejected.

Input longer than :data:`MAX_TEXT_CHARS` is rejected before any scanning, which bounds the
work per turn; all scanning is ``str.find``/``str.count`` or anchored regexes on short
tokens, so there is no backtracking blow-up. :class:`ParseResult` and :data:`MAX_TEXT_CHARS` are
those of :mod:`arew.chat.responses` (the chat-completions reader), named here as this module's too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from arew.chat.responses import MAX_TEXT_CHARS as MAX_TEXT_CHARS  # this module's API too (see above)
from arew.chat.responses import ParseResult, text_problem

MAX_TOKEN_CHARS = 32
PAYLOAD_TAGS = ("interact", "answer")

_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)
_INTEGER = re.compile(r"[0-9]{1,6}", re.ASCII)
_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class PairQuery:
    """A PE comparison, 0-based: is item ``first`` preferred to item ``second`` on ``attrs``?"""

    first: int
    second: int
    attrs: tuple[int, ...]

    @property
    def key(self) -> tuple[frozenset[int], tuple[int, ...]]:
        """Identity for repeat detection: the unordered pair and the attribute set."""
        return frozenset((self.first, self.second)), self.attrs


def extract_tag(text: Any, tag: str) -> ParseResult:
    """Payload between the single ``<tag>`` and ``</tag>`` of ``text`` (stripped)."""
    problem = text_problem(text)
    if problem:
        return ParseResult.failure(problem)
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    n_open, n_close = text.count(open_tag), text.count(close_tag)
    if n_open == 0 and n_close == 0:
        return ParseResult.failure(f"no {open_tag}...{close_tag} block was found")
    if n_open != 1 or n_close != 1:
        return ParseResult.failure(
            f"write exactly one {open_tag} and one {close_tag} (found {n_open} and {n_close})"
        )
    start, end = text.find(open_tag), text.find(close_tag)
    if end < start:
        return ParseResult.failure(f"{close_tag} comes before {open_tag}")
    return ParseResult.success(text[start + len(open_tag) : end].strip())


def _mentions(text: str, tag: str) -> bool:
    return f"<{tag}>" in text or f"</{tag}>" in text


def payload_kind(text: Any) -> str | None:
    """Which payload tag the turn carries, if exactly one kind is present and well formed.

    The agent loop uses this to route a turn: ``"answer"`` means the agent gave its final
    answer (call ``env.answer``), whatever round it was.
    """
    if text_problem(text):
        return None
    present = [tag for tag in PAYLOAD_TAGS if _mentions(text, tag)]
    if len(present) != 1 or not extract_tag(text, present[0]).ok:
        return None
    return present[0]


def extract_payload(text: Any, tag: str) -> ParseResult:
    """Like :func:`extract_tag`, but also rejects a turn that mixes payload kinds."""
    problem = text_problem(text)
    if problem:
        return ParseResult.failure(problem)
    others = [other for other in PAYLOAD_TAGS if other != tag and _mentions(text, other)]
    if others:
        return ParseResult.failure(
            f"this round expects only a <{tag}> payload, but <{others[0]}> also appears"
        )
    return extract_tag(text, tag)


def _split(payload: str) -> list[str]:
    body = payload.strip()
    if len(body) >= 2 and (body[0], body[-1]) in {("[", "]"), ("(", ")")}:
        body = body[1:-1].strip()
    return [token for token in _SEPARATORS.split(body) if token]


def parse_numbers(payload: Any, max_count: int = 64) -> ParseResult:
    """Finite floats from a comma/space separated list."""
    problem = text_problem(payload)
    if problem:
        return ParseResult.failure(problem)
    tokens = _split(payload)
    if not tokens:
        return ParseResult.failure("no numbers were given")
    if len(tokens) > max_count:
        return ParseResult.failure(f"too many numbers ({len(tokens)})")
    values = []
    for token in tokens:
        if len(token) > MAX_TOKEN_CHARS or not _NUMBER.fullmatch(token):
            shown = token[:MAX_TOKEN_CHARS]
            return ParseResult.failure(f"{shown!r} is not a plain decimal number")
        value = float(token)
        if not math.isfinite(value):
            return ParseResult.failure(f"{token!r} is not a finite number")
        values.append(value)
    return ParseResult.success(tuple(values))


def parse_vector(payload: Any, length: int, low: float = 0.0, high: float = 1.0) -> ParseResult:
    """Exactly ``length`` finite numbers, each in ``[low, high]``, as a tuple of floats."""
    numbers = parse_numbers(payload, max_count=max(length, 64))
    if not numbers.ok:
        return numbers
    values = numbers.value
    if len(values) != length:
        return ParseResult.failure(f"expected {length} numbers, got {len(values)}")
    outside = [i + 1 for i, v in enumerate(values) if not low <= v <= high]
    if outside:
        return ParseResult.failure(f"every number must lie in [{low:g}, {high:g}]; entries {outside} do not")
    return ParseResult.success(values)


def _parse_indices(text: str, what: str, upper: int) -> ParseResult:
    tokens = _split(text)
    for token in tokens:
        if not _INTEGER.fullmatch(token):
            shown = token[:MAX_TOKEN_CHARS]
            return ParseResult.failure(f"{what} numbers must be whole numbers, got {shown!r}")
    indices = [int(token) for token in tokens]
    bad = [i for i in indices if not 1 <= i <= upper]
    if bad:
        return ParseResult.failure(f"{what} numbers must be between 1 and {upper}; got {bad}")
    if len(set(indices)) != len(indices):
        return ParseResult.failure(f"{what} numbers must be distinct")
    return ParseResult.success(tuple(i - 1 for i in indices))


def parse_pair_query(payload: Any, n_items: int, n_attrs: int, subset_size: int) -> ParseResult:
    """A PE comparison query as a :class:`PairQuery`.

    Syntax (1-based numbers as shown to the agent): gated tasks (``subset_size < n_attrs``)
    take ``i, j | k, l`` -- items i and j compared on the attribute set {k, l}, with exactly
    ``subset_size`` attributes; full tasks take ``i, j`` and compare on all attributes.
    """
    problem = text_problem(payload)
    if problem:
        return ParseResult.failure(problem)
    gated = subset_size < n_attrs
    parts = payload.split("|")
    if gated and len(parts) != 2:
        return ParseResult.failure(
            f"write the query as 'i, j | attributes' with exactly one '|' and {subset_size} attributes"
        )
    if not gated and len(parts) != 1:
        return ParseResult.failure("write the query as 'i, j' (two item numbers, no '|')")
    items = _parse_indices(parts[0], "item", n_items)
    if not items.ok:
        return items
    if len(items.value) != 2:
        return ParseResult.failure(f"name exactly two different items, got {len(items.value)}")
    if gated:
        attrs = _parse_indices(parts[1], "attribute", n_attrs)
        if not attrs.ok:
            return attrs
        if len(attrs.value) != subset_size:
            return ParseResult.failure(f"name exactly {subset_size} attributes, got {len(attrs.value)}")
        chosen = tuple(sorted(attrs.value))
    else:
        chosen = tuple(range(n_attrs))
    return ParseResult.success(PairQuery(items.value[0], items.value[1], chosen))


def parse_index_set(payload: Any, n_items: int, what: str = "candidate") -> ParseResult:
    """A non-empty set of distinct item numbers, 1-based as shown (``2, 5, 7``), as a frozenset of 0-based indices.

    Separators and brackets as for :func:`parse_numbers`; ``what`` names the items in the errors. Rejected, with
    the reason: no number at all, more numbers than there are items, a token that is not a whole number, a number
    outside 1 to ``n_items``, a number given twice (a repeat is more likely a slip than the intent, so it is not
    merged silently).
    """
    problem = text_problem(payload)
    if problem:
        return ParseResult.failure(problem)
    tokens = _split(payload)
    if not tokens:
        return ParseResult.failure(f"no {what} numbers were given")
    if len(tokens) > n_items:
        return ParseResult.failure(f"{len(tokens)} {what} numbers were given, but there are only {n_items} {what}s")
    indices = _parse_indices(payload, what, n_items)
    return indices if not indices.ok else ParseResult.success(frozenset(indices.value))


MAX_QUESTION_CHARS = 300
_WHITESPACE = re.compile(r"\s+")


def parse_question(payload: Any, max_chars: int = MAX_QUESTION_CHARS) -> ParseResult:
    """A free-text question to a simulated user (MediQ, FloDial), whitespace-normalised.

    It must contain a letter, be at most ``max_chars`` characters after normalisation, and
    hold only printable characters (so it can be sent to an LLM user as JSON).
    """
    problem = text_problem(payload)
    if problem:
        return ParseResult.failure(problem)
    question = _WHITESPACE.sub(" ", payload).strip()
    if not question:
        return ParseResult.failure("the question is empty")
    if len(question) > max_chars:
        return ParseResult.failure(f"the question is longer than {max_chars} characters")
    if any(not ch.isprintable() for ch in question) or not _encodable(question):
        return ParseResult.failure("the question contains unprintable characters")
    if not any(ch.isalpha() for ch in question):
        return ParseResult.failure("the question contains no words")
    return ParseResult.success(question)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_SELECTION_CHARS = 2000
NONE_WORDS = ("NONE", "UNKNOWN")
# a word that, right after the numbers, makes the answer ambiguous ("FACTS: 2 or 3", "ROW: 1 maybe")
HEDGES = frozenset("and or nor also plus maybe perhaps possibly probably except but not either then".split())

_LIST = re.compile(r"[0-9]+(?:(?:[ \t]*,[, \t]*|[ \t]+and[ \t]+|[ \t]*&[ \t]*|[ \t]+)[0-9]+)*", re.ASCII | re.IGNORECASE)
_LIST_NUMBER = re.compile(r"[0-9]+", re.ASCII)
_NONE = re.compile(rf"(?:{'|'.join(NONE_WORDS)})(?![A-Za-z0-9_])", re.IGNORECASE)
_LEADING_YES_NO = re.compile(r"(?:yes|no)(?![^\W_])[ \t]*[.,:;!\-\u2013\u2014]?\s*", re.IGNORECASE)
_DECIMAL_TAIL = re.compile(r"\.[0-9]", re.ASCII)
_TAIL_SEPARATOR = re.compile(r"[ \t]*(?:[.:;,)(\-\u2013\u2014][ \t]*)?")
_FIRST_WORD = re.compile(r"[A-Za-z]+")
_ITEM = re.compile(r"[ \t]*(?:[-*\u2022][ \t]*)?([0-9]{1,6})[ \t]*[.)][ \t]+(\S.*)", re.ASCII)
_STANDALONE = re.compile(r"(?<![\w./-])([0-9]{1,6})(?![\w/]|[.,][0-9])", re.ASCII)
_MARKUP = re.compile(r"\*\*|__|`")


@dataclass(frozen=True)
class _Answer:
    """One ``LABEL: ...`` statement: the numbers (None: items follow on the next lines), where it ends."""

    numbers: tuple[int, ...] | None
    end: int


def _normal_item(text: str) -> str:
    return " ".join(text.split()).strip(" \t\"'").rstrip(".?!").casefold()


def _first_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _read_answer(body: str, start: int) -> ParseResult:
    """The numbers after the colon at ``start`` (see :func:`parse_selection`), as an :class:`_Answer`."""
    pos = start
    while pos < len(body) and body[pos] in " \t":
        pos += 1
    rest = body[pos:]
    if not rest or rest.splitlines()[0].strip() == "":
        return ParseResult.success(_Answer(None, pos))  # nothing on the label's line: items below, or nothing
    none = _NONE.match(rest)
    if none:
        return ParseResult.success(_Answer((), pos + none.end()))
    numbers = _LIST.match(rest)
    if not numbers:
        shown = rest.split()[0][:MAX_TOKEN_CHARS]
        return ParseResult.failure(f"{shown!r} is not a whole number or NONE")
    tokens = _LIST_NUMBER.findall(numbers.group())
    if any(len(token) > 6 for token in tokens):
        return ParseResult.failure("the reply names a number that is too long")
    return ParseResult.success(_Answer(tuple(int(t) for t in tokens), pos + numbers.end()))


def _check_tail(tail: str, truncated: bool) -> str | None:
    """Why the text after the numbers makes the answer ambiguous, or None when it is an explanation or nothing."""
    if not tail.strip():
        return "the reply was cut off right after the numbers, so more may have followed" if truncated else None
    if tail[0] in "\r\n" or tail[0] in "\v\f\x1c\x1d\x1e\x85\u2028\u2029":
        return None  # the explanation starts on a line of its own
    if _DECIMAL_TAIL.match(tail):
        return "the numbers must be whole numbers"  # 2.5, 2,5 is two numbers
    separator = _TAIL_SEPARATOR.match(tail)
    explanation = tail[separator.end() :]
    if not explanation.strip():
        # "FACTS: 2." is complete; "FACTS: 2, 3," cut by the length cap may have gone on
        return "the reply was cut off right after the numbers, so more may have followed" if truncated else None
    if explanation[0].isdigit():
        return "the numbers are followed by another number after a separator, which is ambiguous"
    word = _FIRST_WORD.match(explanation)
    if word and word.group().lower() in HEDGES:
        return f"the numbers are followed by {word.group()!r}, which makes the answer ambiguous"
    return None


def _select(numbers: tuple[int, ...], permitted: set[int], max_count: int) -> ParseResult:
    if len(numbers) > max_count:
        return ParseResult.failure(f"the reply names {len(numbers)} numbers, at most {max_count} are allowed")
    if any(n not in permitted for n in numbers):
        return ParseResult.failure(f"the reply names numbers outside the list: {list(numbers)}")
    if len(set(numbers)) != len(numbers):
        return ParseResult.failure("the reply repeats a number")
    return ParseResult.success(numbers)


def _quoted_items(lines: list[str], options: dict[int, str] | None, truncated: bool) -> ParseResult:
    """Numbers from lines that each quote one offered item, ``3. <its text>``; else why not."""
    if not options:
        return ParseResult.failure("the numbers of a list must come with the texts offered")
    if truncated:
        return ParseResult.failure("the list was cut off by the length cap, so more items may have followed")
    numbers = []
    for line in lines:
        item = _ITEM.fullmatch(line)
        if not item:
            return ParseResult.failure("every line of a list must be one numbered item, '3. <its text>'")
        number = int(item.group(1))
        if number not in options or _normal_item(item.group(2)) != _normal_item(options[number]):
            return ParseResult.failure(f"item {number} of the list does not quote the text offered under that number")
        numbers.append(number)
    return ParseResult.success(tuple(numbers))


def parse_selection(
    text: Any, label: str, allowed: Any, max_count: int, options: Any = None, truncated: bool = False
) -> ParseResult:
    """A simulated user's choice of numbers from a numbered list, written as requested
    (``LABEL: 3, 7`` or ``LABEL: NONE``) or in one of the unambiguous ways real models write it.

    Used on the output of an LLM user (see :mod:`arew.envs.users.llm`). ``allowed``: the numbers
    (1-based, as shown) that may be named; ``max_count``: how many at most; ``options``: the
    text shown under each number (a mapping), which makes the list form below readable;
    ``truncated``: the reply was cut off by the length cap. Returns the numbers as a tuple of
    ints in the order given; NONE (or UNKNOWN) gives the empty tuple. Accepted:

    - the answer: the label (case-insensitive, ``**bold**`` or in backticks too) and a colon at
      the start of the reply, then NONE or the numbers, separated by commas, spaces or "and";
      a bare "Yes" or "No" may come before it (a yes/no question answered first);
    - after the answer, an explanation: after a line break, after one separator (``. : ; , - (``)
      or after a space and a word, as in ``FACTS: 2 - she has a fever`` or ``ROW: 3\\nYes, ...``;
      further ``LABEL:`` statements are allowed only if they name the same numbers;
    - the list form: every non-blank line is ``3. <the text offered as 3>`` (or ``3)``, maybe
      after a bullet), quoting that item word for word (case, spacing and final punctuation
      aside), optionally under a line holding only ``LABEL:``.

    Rejected, among others: prose before the label; numbers outside ``allowed``, repeated, more
    than ``max_count``, or not whole; two answers that differ; numbers followed by a hedge
    ("2 or 3", "NONE, but 4", "2 maybe"), by another number ("2 - 3", "2. 3."), or by an
    explanation that names another allowed number as a standalone number; a list line that is
    not a quote of its item; and, when ``truncated``, an answer the cut may have shortened
    (numbers at the very end; any list form). Returns a failure with the reason otherwise.
    """
    problem = text_problem(text)
    if problem:
        return ParseResult.failure(problem)
    if not isinstance(label, str) or not label:
        return ParseResult.failure("no label was given")
    try:
        permitted = {int(x) for x in allowed}
    except (TypeError, ValueError):
        return ParseResult.failure("the allowed numbers are not integers")
    try:
        texts = {int(k): str(v) for k, v in dict(options).items()} if options is not None else None
    except (TypeError, ValueError):
        return ParseResult.failure("the offered texts are not a mapping from numbers to text")
    if not isinstance(max_count, int) or isinstance(max_count, bool):
        return ParseResult.failure("the largest count is not an integer")
    body = _MARKUP.sub("", text).strip()
    if len(body) > MAX_SELECTION_CHARS:
        return ParseResult.failure(f"the reply is longer than {MAX_SELECTION_CHARS} characters")
    lead = _LEADING_YES_NO.match(body)
    label_at = re.compile(rf"(?<![^\W_]){re.escape(label)}[ \t]*:", re.IGNORECASE)
    if lead and label_at.match(body, lead.end()):
        body = body[lead.end() :]
    statements = list(label_at.finditer(body))
    if not statements:
        lines = _first_lines(body)
        if lines and _ITEM.fullmatch(lines[0]) and texts is not None:
            listed = _quoted_items(lines, texts, truncated)
            return _select(listed.value, permitted, max_count) if listed.ok else listed
        return ParseResult.failure(f"the reply must start with '{label}:'")
    if statements[0].start() != 0:
        return ParseResult.failure(f"the reply must start with '{label}:'")
    answers = []
    for statement in statements:
        answer = _read_answer(body, statement.end())
        if not answer.ok:
            return answer
        answers.append(answer.value)
    first = answers[0]
    if first.numbers is None:  # "LABEL:" alone on its line: a list below it, nothing else
        if len(answers) > 1:
            return ParseResult.failure("write a single line: the reply has more than one answer")
        lines = _first_lines(body[first.end :])
        if not lines:
            return ParseResult.failure("the reply names no number and not NONE")
        listed = _quoted_items(lines, texts, truncated)
        return _select(listed.value, permitted, max_count) if listed.ok else listed
    if any(a.numbers is None or set(a.numbers) != set(first.numbers) for a in answers[1:]):
        return ParseResult.failure("write a single line: the reply gives more than one answer, and they differ")
    ambiguous = _check_tail(body[first.end :], truncated)
    if ambiguous:
        return ParseResult.failure(ambiguous)
    selected = _select(first.numbers, permitted, max_count)
    if not selected.ok:
        return selected
    explanation = body[first.end :]
    others = sorted({int(n) for n in _STANDALONE.findall(explanation)} & (permitted - set(first.numbers)))
    if others:
        return ParseResult.failure(f"the explanation names other numbers of the list ({others}), which is ambiguous")
    return selected

