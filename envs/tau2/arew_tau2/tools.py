"""Tool calls in the agent's text, the compact tool list of the prompt, and tool output as shown.

Call syntax (inside ``<interact>...</interact>``): one JSON object
``{"name": "<tool>", "arguments": {...}}``. Tolerated: surrounding whitespace, one Markdown
code fence around the object (```` ```json ... ``` ````), a missing ``arguments`` (no
arguments), ``"parameters"`` or ``"args"`` in its place, and arguments given as a JSON
string that holds an object (the OpenAI wire format). Rejected, each with a reason for the
agent: text over :data:`arew.envs.parsing.MAX_TEXT_CHARS`, anything that is not one JSON object,
NaN or infinite numbers, a name that is not a non-empty string of at most
:data:`MAX_NAME_CHARS`, arguments that are not an object, two argument keys at once, and any
other key. :func:`parse_tool_call` never raises.

Whether the named tool exists and takes those arguments is checked by the environment
(:func:`check_arguments` and :func:`type_problem` here give the reason), not by the parser.
Argument types are checked strictly, as JSON values against tau2's own parameter model (pydantic's
strict mode on the JSON text): a string, a boolean or null is no number (``"2.0"``, ``true``), a
number with a fraction part or written with one is no integer (``3.0``), a number is no string,
and an object must be an object; an integer is a number. tau2's tools do not check types, and
pydantic's lax mode, which tau2 would use, takes ``true`` and ``"2.0"`` as numbers.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arew.envs.parsing import MAX_TEXT_CHARS, ParseResult

MAX_NAME_CHARS = 64
MAX_MESSAGE_CHARS = 2000
ARGUMENT_KEYS = ("arguments", "parameters", "args")
TRUNCATED = "... [output cut: {} characters in all]"

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?[ \t]*```\Z", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ToolRequest:
    """A parsed call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any]

    @property
    def key(self) -> str:
        """Identity for repeat detection: name and canonical arguments."""
        return self.name + json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def looks_like_tool_call(payload: Any) -> bool:
    """Whether a dual-control payload is meant as a tool call (a JSON object, maybe fenced) rather than a message."""
    if not isinstance(payload, str):
        return False
    body = payload.strip()
    return body.startswith("{") or body.startswith("```")


def parse_tool_call(payload: Any) -> ParseResult:
    """A :class:`ToolRequest` from the payload of ``<interact>``; see the module docstring."""
    if not isinstance(payload, str):
        return ParseResult.failure("the tool call is not text")
    if len(payload) > MAX_TEXT_CHARS:
        return ParseResult.failure(f"the tool call is longer than {MAX_TEXT_CHARS} characters")
    body = _strip_fence(payload.strip())
    if not body:
        return ParseResult.failure('the tool call is empty; write {"name": "...", "arguments": {...}}')
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        reason = str(error) if "finite" in str(error) else "it is not valid JSON"
        return ParseResult.failure(f'the tool call must be one JSON object {{"name": ..., "arguments": {{...}}}}; {reason}')
    if not isinstance(value, dict):
        return ParseResult.failure('the tool call must be a JSON object {"name": ..., "arguments": {...}}')
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParseResult.failure('the tool call needs "name": the tool\'s name as a string')
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        return ParseResult.failure(f"the tool name is longer than {MAX_NAME_CHARS} characters")
    given = [key for key in ARGUMENT_KEYS if key in value]
    if len(given) > 1:
        return ParseResult.failure(f'give the arguments once, under "arguments" (found {given})')
    others = sorted(str(key)[:32] for key in value if key != "name" and key not in ARGUMENT_KEYS)
    if others:
        return ParseResult.failure(f'the tool call may hold only "name" and "arguments", not {others}')
    arguments = value[given[0]] if given else {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_reject_constant) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return ParseResult.failure('"arguments" must be a JSON object of argument names and values')
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ParseResult.failure('"arguments" must be a JSON object of argument names and values')
    if not finite_json(arguments):
        return ParseResult.failure("the arguments hold a number too large to be finite")
    return ParseResult.success(ToolRequest(name, arguments))


def check_arguments(name: str, arguments: Mapping[str, Any], required: Iterable[str], accepted: Iterable[str]) -> str | None:
    """Why the arguments do not fit the tool's parameters (missing or unknown names), or None."""
    required, accepted = set(required), set(accepted)
    missing = sorted(required - set(arguments))
    unknown = sorted(str(k)[:32] for k in arguments if k not in accepted)
    if missing:
        return f"{name} needs the argument(s) {missing}"
    if unknown:
        allowed = sorted(accepted) if accepted else "none"
        return f"{name} takes no argument(s) {unknown} (its arguments: {allowed})"
    return None


# what pydantic's strict-mode error types mean, for the agent
_EXPECTED = {
    "float_type": "a number",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "list_type": "a JSON array",
    "none_required": "null",
}


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def type_problem(name: str, model: Any, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not have the types of the tool's parameters (``model``: tau2's pydantic model of
    them; None checks nothing), or None. Strict: see the module docstring. Never raises."""
    if model is None:
        return None
    try:
        body = json.dumps(dict(arguments), allow_nan=False)
    except (TypeError, ValueError):
        return f"{name}: the arguments must be JSON values (strings, numbers, true/false, null, arrays, objects)"
    try:
        model.model_validate_json(body, strict=True)
    except Exception as error:  # pydantic's ValidationError, or anything odd
        try:
            errors = [e for e in error.errors() if e.get("loc")]  # type: ignore[attr-defined]
        except Exception:
            errors = []
        if not errors:
            return f"{name}: the arguments have the wrong types ({str(error)[:120]})"
        loc = [str(p) for p in errors[0]["loc"]]
        where, value = loc[0], arguments.get(loc[0])
        # the argument itself has the wrong kind (the first branch of a union that names one: "a string" for an enum or a string)
        kinds = [_EXPECTED[e["type"]] for e in errors if str(e["loc"][0]) == where and e.get("type") in _EXPECTED]
        if kinds and (len(loc) == 1 or not isinstance(value, (dict, list))):
            shown = f" ({json.dumps(value)[:40]})" if isinstance(value, (bool, int, float, str)) else ""
            return f"{name}: argument {where} must be {kinds[0]}, not {_json_kind(value)}{shown}"
        return f"{name}: argument {'.'.join(loc)} has the wrong type ({errors[0].get('msg', 'invalid')})"
    return None


def parse_message(payload: Any, max_chars: int = MAX_MESSAGE_CHARS) -> ParseResult:
    """A plain-text message to the customer: non-empty, at most ``max_chars``, printable, with a word."""
    if not isinstance(payload, str):
        return ParseResult.failure("the message is not text")
    text = payload.strip()
    if not text:
        return ParseResult.failure("the message is empty")
    if len(text) > max_chars:
        return ParseResult.failure(f"the message is longer than {max_chars} characters")
    if any(not (ch.isprintable() or ch in "\n\t") for ch in text):
        return ParseResult.failure("the message contains unprintable characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ParseResult.failure("the message contains unprintable characters")
    if not any(ch.isalpha() for ch in text):
        return ParseResult.failure("the message contains no words")
    return ParseResult.success(text)


def message_key(text: str) -> str:
    """Identity of a message for repeat detection: its lower-case words and numbers, in order."""
    return " ".join(_WORD.findall(text.lower()))


def render_tool(spec: Any) -> str:
    """``name(arg: type, opt: type = default): first sentence of the description``."""
    params = []
    for key, type_text, required, default in spec.params:
        shown = f"{key}: {type_text}"
        if not required:
            shown += f" = {json.dumps(default)}"
        params.append(shown)
    return f"{spec.name}({', '.join(params)}): {spec.summary}"


def render_tools(specs: Iterable[Any]) -> str:
    return "\n".join(render_tool(spec) for spec in specs)


def show_output(content: str | None, max_chars: int) -> str:
    """Tool output as the agent sees it: JSON re-dumped compactly, then cut to ``max_chars``."""
    text = "" if content is None else str(content)
    if text[:1] in "{[":
        try:
            text = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, RecursionError):
            pass
    if len(text) > max_chars:
        text = text[:max_chars] + TRUNCATED.format(len(text))
    return text


def finite_json(value: Any) -> bool:
    """Whether ``value`` holds only finite numbers (``1e999`` parses as infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_json(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_json(v) for v in value)
    return True
