"""tau2-bench telecom as an :class:`~arew.envs.base.ActiveReasoningEnv`, solo and dual control.

The episode runs tau2's own ``TelecomEnvironment`` directly (:mod:`arew_tau2.runtime`), not
``tau2.gym``. Every decision is an action round (``rounds = ("act",)``) on channel "as".

**Solo** (``tau2-solo``): the system prompt holds the instruction, tau2's solo policy and the
compact list of all 43 tools (13 company, 30 phone; :mod:`arew_tau2.tools`); the first user
message is the task's ticket. Each turn is one tool call in ``<interact>``; tau2 routes phone
tools to the device (requestor "assistant" in solo mode). The feedback is the tool's output
(compact JSON, cut at ``tool_output_chars``) and the next turn's instruction.

**Dual control** (``tau2-dual``): the prompt holds tau2's (non-solo) policy and the company
tools only; the first user message says a customer is on the line. Each turn is a tool call
(company tools; a phone tool is "not one of your tools") or a plain-text message to the
customer (any payload that does not start with ``{`` or a code fence). A message goes to the
customer (:mod:`arew_tau2.customer`), whose reply is the feedback; the customer runs phone
tools itself through :class:`EpisodeDevice` (requestor "user", recorded in the trajectory,
outputs hidden from the agent). The customer ending the call (``###STOP###``,
``###TRANSFER###``, ``###OUT-OF-SCOPE###``) ends the episode (``StepResult.done``).

**Ending.** ``<answer>...</answer>`` is the agent's stop (tau2's AGENT_STOP): critique 0,
valid; an unparsable final text gets -1, is not a stop, and the episode ends anyway.
Termination reasons: ``agent_stop``, ``customer_stop``, ``customer_transfer``,
``customer_out_of_scope`` (the last three are tau2's USER_STOP) and ``max_turns`` (every other
end: turns used up without a valid ``<answer>``, or a truncated episode; tau2's MAX_STEPS).

**Which calls reach tau2.** A call is executed and recorded only if it parses, names one of
the caller's tools, gives every required argument and no unknown one, and its values have the
parameters' types, strictly, as JSON values (tau2's own pydantic model of the tool in strict
mode, :func:`arew_tau2.tools.type_problem`: ``true`` or ``"2.0"`` is no number, ``"3"`` or
``3.0`` no integer; values are passed on unchanged). The last two checks are this project's:
tau2 compares an expected action only on the arguments the call supplied, so ``refuel_data``
with no arguments (an error at run time) would match the expected ``refuel_data(...)``; tau2's
tools do not check types, so ``set_apn_settings(apn_settings=true)`` stores a bool as the APN
settings and every later device check crashes, and ``refuel_data(gb_amount=true)`` refuels 1
GB. Such calls are invalid (critique -1 under ``critique_invalid``, a feedback that names the
argument and the type it needs) and never reach tau2. The customer's calls pass the same
checks. Calls that reach tau2 and fail (``ToolMessage.error``) are recorded, as tau2 records
them.

**Critiques** of tool calls and messages: :mod:`arew_tau2.critiques`; **rewards**
(``official``, ``fractional``, ``auto``): :mod:`arew_tau2.rewards`; the options besides the
customer's: :class:`~arew_tau2.settings.Tau2Settings`.

**Proxies**: ``as`` per turn is 1 when the step newly matched an expected action or (a
message) newly brought information, else 0; scalars: ``tool_calls``, ``tool_errors``,
``invalid``, ``repeats``, ``noop_writes``, ``unneeded_writes`` (the agent's writes and the writes
its messages asked for that match no expected action), ``messages``, ``customer_tool_calls``,
``info_reveals``, ``expected_actions`` / ``expected_actions_matched`` /
``expected_actions_share``, ``assistant_repairs`` / ``user_repairs`` (expected actions whose
requestor is the assistant / the user that were matched; in dual control the user side is
done by the customer, so a low ``user_repairs_share`` next to a high
``assistant_repairs_share`` is the self-locking sign of an agent that does not get the
customer to act), their ``*_share``, ``assertions_met_share``, ``turns``,
``reward_official``, ``reward_fractional``, ``reward`` (the one chosen; the driver does not
log this key), the termination one-hot ``ended_<reason>`` and, in dual control, the customer's
counters ``customer_*`` (calls, requests, fallbacks, tool calls, ...).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import datetime
from typing import Any

from arew.envs import parsing
from arew.envs.base import ActiveReasoningEnv, Channel, StepResult
from arew.envs.options import Option
from arew_tau2 import DUAL, SOLO, prompts
from arew_tau2 import tools as tool_text
from arew_tau2.critiques import (
    diagnostic_reads,
    end_critique,
    identity_items,
    invalid_critique,
    message_critique,
    revealed_items,
    tool_call_critique,
)
from arew_tau2.customer import (
    CUSTOMER_DEFAULTS,
    CUSTOMER_OPTIONS,
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    DeviceResult,
    check_customer_options,
    make_customer,
)
from arew_tau2.customer.offline import goal_of
from arew_tau2.customer.reading import requested_tools
from arew_tau2.rewards import FinalState, fractional_reward, official_reward
from arew_tau2.runtime import (
    AssistantMessage,
    SimulationRun,
    Task,
    TerminationReason,
    ToolCall,
    ToolSpec,
    UserMessage,
    new_environment,
    runtime,
)
from arew_tau2.settings import REWARDS, Tau2Settings

MAX_TURNS = {SOLO: 30, DUAL: 22}
STOP_TOKENS = {STOP: "customer_stop", TRANSFER: "customer_transfer", OUT_OF_SCOPE: "customer_out_of_scope"}
TERMINATIONS = ("agent_stop", "customer_stop", "customer_transfer", "customer_out_of_scope", "max_turns")
AGENT_STOP_TOKEN = STOP  # tau2 records the agent's stop with the same token
# the episode's counts, proxies of the same names
COUNTERS = (
    "tool_calls",
    "tool_errors",
    "invalid",
    "repeats",
    "noop_writes",
    "unneeded_writes",
    "messages",
    "customer_tool_calls",
    "info_reveals",
)


class EpisodeDevice:
    """The customer's phone in one episode (the ``Device`` protocol of :mod:`arew_tau2.customer`)."""

    def __init__(self, episode: Tau2Env):
        self._episode = episode
        self.user_tools: list[dict[str, Any]] = [spec.schema for spec in runtime().user_tools.values()]

    def call(self, name: str, arguments: dict) -> DeviceResult:
        return self._episode._device_call(name, arguments)


class Tau2Env(ActiveReasoningEnv):
    rounds = ("act",)
    TAKES_USER_OPTIONS = False
    OPTIONS = {
        "reward": Option(str, "official (tau2's), fractional (mean of checks met), auto (the row's: train fractional, else official)", choices=REWARDS),
        "max_turns": Option(int, "action turns before the final <answer> (null: solo 30, dual 22)", low=1, high=200, nullable=True),
        "tool_output_chars": Option(int, "tool output shown to the agent is cut after this many characters", low=50),
        "critique_invalid": Option(bool, "-1 for a malformed call, an unknown tool, bad argument names, ill-typed arguments or an invalid message"),
        "critique_tool_error": Option(bool, "-1 for a call the tool rejected (ToolMessage.error)"),
        "critique_repeat": Option(bool, "-1 for a call repeated from the same state, or a message repeated without news"),
        "critique_noop_write": Option(bool, "-1 for a WRITE tool that changed nothing"),
        "critique_unneeded_write": Option(bool, "-1 for a WRITE that changed something and matches no expected action, or a message that asked the customer for a write matching none"),
        "critique_undone_repair": Option(bool, "-1 for a WRITE (or a message asking for one) that toggles an already matched repair back"),
        "critique_expected_action": Option(bool, "+1 for a call that newly matches an expected action"),
        "critique_information": Option(bool, "+1 for a new phone reading that bears on the task (solo: the agent's own), or a message whose reply newly brings identity or a repair it asked for"),
        "critique_unverified_end": Option(bool, "-1 for ending the episode before the success reading has shown success since the phone last changed"),
        **CUSTOMER_OPTIONS,
    }
    # the options' defaults: those of the settings and of the customer, which the options go to
    PASSED_ON_DEFAULTS = {**asdict(Tau2Settings()), **CUSTOMER_DEFAULTS}

    def __init__(
        self,
        task: Task | str | dict,
        mode: str = "solo",
        seed: int = 0,
        settings: Tau2Settings | None = None,
        row_reward: str = "fractional",
        customer: Any = "offline",
        **customer_options: Any,
    ):
        if mode not in ("solo", "dual"):
            raise ValueError(f"mode must be 'solo' or 'dual', got {mode!r}")
        if row_reward not in REWARDS[1:]:
            raise ValueError(f"row_reward must be one of {list(REWARDS[1:])}, got {row_reward!r}")
        unknown = sorted(set(customer_options) - set(CUSTOMER_OPTIONS))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} of Tau2Env")
        if isinstance(task, str):
            task = Task.model_validate_json(task)
        elif isinstance(task, dict):
            task = Task.model_validate(task)
        self.task: Task = task
        self.settings = settings or Tau2Settings()
        self.solo = mode == "solo"
        self.task_name = SOLO if self.solo else DUAL
        if self.solo and not task.ticket:
            raise ValueError(f"task {task.id!r} has no ticket: it cannot be played solo")
        self.seed = int(seed)
        self.max_turns = int(self.settings.max_turns if self.settings.max_turns is not None else MAX_TURNS[self.task_name])
        self.reward_kind = row_reward if self.settings.reward == "auto" else self.settings.reward
        rt = runtime()
        self._tools: dict[str, ToolSpec] = rt.tools_for(self.solo)
        self.customer = None
        if not self.solo:  # the customer option names a kind; tests may hand over a customer object instead
            self.customer = make_customer(task, customer=customer, **customer_options) if isinstance(customer, str) else customer
        self.device = EpisodeDevice(self)
        self._started = time.perf_counter()
        self._start_time = datetime.now().isoformat()
        self.env = new_environment(task, self.solo)
        self.final_state = FinalState(task, self.env)
        criteria = task.evaluation_criteria
        self._expected = list(criteria.actions or []) if criteria is not None else []
        self._matched = [False] * len(self._expected)
        self._identity = identity_items(getattr(task.user_scenario.instructions, "known_info", None))
        self._goal = goal_of(task)
        self._goal_tool = self._goal[0] if self._goal else None
        self._success_seen = False  # the success reading has shown success since the phone last changed
        self._diagnostic = diagnostic_reads([a.name for a in self._expected], self._goal_tool)
        self._state = self._hash()
        self._states = {self._state}  # every state of the databases the episode has been in
        self._messages: list[Any] = []
        self._turn = 0
        self._done = False
        self._termination: str | None = None
        self._seen_calls: set[tuple[str, tuple]] = set()
        self._seen_messages: set[str] = set()
        self._seen_outputs: set[tuple[str, str]] = set()
        self._revealed: set[str] = set()
        self._reply_events: list[dict[str, Any]] | None = None
        self._ids = 0
        self._as: list[int] = []
        self._counts = dict.fromkeys(COUNTERS, 0)

    @classmethod
    def check_option_values(cls, options: dict[str, Any], prefix: str) -> None:
        check_customer_options(options, prefix)

    @classmethod
    def from_row(cls, extra_info: dict[str, Any], seed: int, **options: Any) -> Tau2Env:
        name = extra_info.get("task", SOLO)
        if name not in (SOLO, DUAL):
            raise ValueError(f"not a tau2 row: task {name!r}")
        settings, customer_options = Tau2Settings.split(options)
        return cls(
            task=extra_info["task_json"],
            mode="solo" if name == SOLO else "dual",
            seed=seed,
            settings=settings,
            row_reward=extra_info.get("reward", "official"),
            **customer_options,
        )

    @property
    def system_prompt(self) -> str:
        rt = runtime()
        company = tool_text.render_tools(rt.agent_tools.values())
        if self.solo:
            text = prompts.tools_text(company, tool_text.render_tools(rt.user_tools.values()))
            return prompts.system_prompt_solo(rt.policy[True], text, self.max_turns)
        return prompts.system_prompt_dual(rt.policy[False], prompts.tools_text(company, None), self.max_turns)

    def initial_messages(self) -> list[dict[str, str]]:
        opening = prompts.opening_solo(self.task.ticket or "") if self.solo else prompts.opening_dual()
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": opening + "\n\n" + prompts.next_instruction(1, self.max_turns, self.solo)},
        ]

    def final_turn_notice(self) -> str:
        return prompts.final_turn_notice()

    def _hash(self) -> tuple[str | None, str | None]:
        return self.env.get_db_hash(), self.env.get_user_db_hash()

    def _next_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids}"

    def _open_turn(self) -> None:
        if self._done:
            raise RuntimeError("the episode is over")
        if self._turn >= self.max_turns:
            raise RuntimeError(f"all {self.max_turns} turns are used; only answer() is left")
        self._turn += 1

    def _follow(self) -> str:
        instruction = prompts.next_instruction(self._turn + 1, self.max_turns, self.solo)
        return "\n\n" + instruction if instruction else ""

    def _step(self, feedback: str, critique: int, proxy: int, valid: bool = True, done: bool = False, **info: Any) -> StepResult:
        self._as.append(proxy)
        return StepResult(
            feedback=feedback if done else feedback + self._follow(),
            critique=critique,
            channel=Channel.AS,
            valid=valid,
            done=done,
            info={"turn": self._turn, **info, "as_proxy": proxy},
        )

    def _invalid(self, reason: str, rule: str) -> StepResult:
        self._counts["invalid"] += 1
        return self._step(prompts.invalid(reason), invalid_critique(self.settings), 0, valid=False, kind="invalid", rule=rule, error=reason)

    def _observe(self, name: str, result: Any, before: tuple[str | None, str | None]) -> bool:
        """Keep track of whether the success reading shows success on the phone as it is now; returns whether the call
        took the databases back to a state the episode was in before (another one than just before it)."""
        if self._state != before:
            self._success_seen = False
        if self._goal and name == self._goal[0] and not result.error and self._goal[1](result.content or ""):
            self._success_seen = True
        returned = self._state != before and self._state in self._states
        self._states.add(self._state)
        return returned

    @property
    def _verified(self) -> bool:
        """Whether ending now is the end of a task done: the success reading showed success on the phone as it is,
        or the task has no success reading, or its resolution is a transfer that was made."""
        transferred = any(done and action.name == "transfer_to_human_agents" for action, done in zip(self._expected, self._matched))
        return self._goal is None or self._success_seen or transferred

    def _match(self, call: ToolCall) -> tuple[list[int], bool]:
        """(the expected actions the call newly matches, whether it matches any expected action)."""
        new, matches = [], False
        for i, action in enumerate(self._expected):
            if action.compare_with_tool_call(call):
                matches = True
                if not self._matched[i]:
                    new.append(i)
                self._matched[i] = True
        return new, matches

    async def act(self, text: str, counterfactual: str | None = None) -> StepResult:
        self._open_turn()
        payload = parsing.extract_payload(text, "interact")
        if not payload.ok:
            return self._invalid(payload.error, "no_payload")
        if self.solo or tool_text.looks_like_tool_call(payload.value):
            request = tool_text.parse_tool_call(payload.value)
            if not request.ok:
                return self._invalid(request.error, "malformed_call")
            return self._tool_step(request.value)
        message = tool_text.parse_message(payload.value)
        if not message.ok:
            return self._invalid(message.error, "invalid_message")
        return await self._message_step(message.value)

    def _unknown_tool(self, name: str) -> str:
        if not self.solo and name in runtime().user_tools:
            return f"{name} is a tool of the customer's phone, not one of yours: ask the customer to do it"
        return f"{name[:64]!r} is not one of your tools"

    def _tool_step(self, request: tool_text.ToolRequest) -> StepResult:
        spec = self._tools.get(request.name)
        if spec is None:
            return self._invalid(self._unknown_tool(request.name), "unknown_tool")
        problem = spec.argument_problem(request.arguments)
        if problem:
            return self._invalid(problem, "bad_arguments")
        before = self._state
        seen = (request.key, before)
        repeat = seen in self._seen_calls
        self._seen_calls.add(seen)
        call = ToolCall(id=self._next_id(), name=spec.name, arguments=request.arguments, requestor="assistant")
        result = self.env.get_response(call)
        self._messages += [AssistantMessage(role="assistant", tool_calls=[call]), result]
        self._state = self._hash()
        returned = self._observe(spec.name, result, before)
        noop = spec.kind == "write" and not result.error and self._state == before
        new, expected = self._match(call)
        unneeded = spec.kind == "write" and not result.error and not noop and not expected
        undone = spec.kind == "write" and not result.error and returned and expected and not new
        output = (spec.name, result.content or "")
        reading = spec.kind == "read" and not result.error and spec.name in self._diagnostic and output not in self._seen_outputs
        self._seen_outputs.add(output)
        self._counts["tool_calls"] += 1
        self._counts["tool_errors"] += int(result.error)
        self._counts["repeats"] += int(repeat)
        self._counts["noop_writes"] += int(noop)
        self._counts["unneeded_writes"] += int(unneeded)
        critique, rule = tool_call_critique(
            self.settings,
            tool_error=bool(result.error),
            repeat=repeat,
            new_action=bool(new),
            noop_write=noop,
            unneeded_write=unneeded,
            undone_repair=undone,
            new_reading=reading,
        )
        shown = tool_text.show_output(result.content, self.settings.tool_output_chars)
        return self._step(
            prompts.tool_output(spec.name, shown, result.error),
            critique,
            int(bool(new)),
            kind="tool",
            tool=spec.name,
            rule=rule,
            tool_error=bool(result.error),
            repeat=repeat,
            noop_write=noop,
            unneeded_write=unneeded,
            undone_repair=undone,
            new_reading=reading,
            new_actions=[self._expected[i].action_id for i in new],
        )

    def _device_call(self, name: str, arguments: Any) -> DeviceResult:
        """A phone tool run by the customer: executed as requestor "user" and recorded."""
        if self._reply_events is None:
            return DeviceResult("Error: the phone can be used only while answering the agent", True)
        spec = runtime().user_tools.get(name) if isinstance(name, str) else None
        if spec is None:
            return DeviceResult(f"Error: {str(name)[:64]!r} is not a tool of the phone", True)
        if not isinstance(arguments, dict):
            return DeviceResult("Error: the arguments must be an object", True)
        problem = spec.argument_problem(arguments)
        if problem:
            return DeviceResult(f"Error: {problem}", True)
        call = ToolCall(id=self._next_id(), name=spec.name, arguments=dict(arguments), requestor="user")
        before = self._state
        result = self.env.get_response(call)
        self._messages += [UserMessage(role="user", tool_calls=[call]), result]
        self._state = self._hash()
        returned = self._observe(spec.name, result, before)
        new, expected = self._match(call)
        output = (spec.name, result.content or "")
        reading = spec.kind == "read" and not result.error and output not in self._seen_outputs
        self._seen_outputs.add(output)
        self._counts["customer_tool_calls"] += 1
        self._reply_events.append(
            {
                "tool": spec.name,
                "error": bool(result.error),
                "new_reading": reading,
                "new_actions": new,
                "unneeded": spec.kind == "write" and not expected,
                "undone": spec.kind == "write" and not result.error and returned and expected and not new,
            }
        )
        return DeviceResult(result.content or "", bool(result.error))

    async def _message_step(self, text: str) -> StepResult:
        key = tool_text.message_key(text)
        repeat = key in self._seen_messages
        self._seen_messages.add(key)
        self._messages.append(AssistantMessage(role="assistant", content=text))
        self._counts["messages"] += 1
        self._reply_events = []
        try:
            turn = await self.customer.reply(text, self.device)
        finally:
            events, self._reply_events = self._reply_events, None
        stop = turn.stop if turn.stop in STOP_TOKENS else None
        reply = str(turn.text or "")
        content = (reply + " " + stop).strip() if stop else (reply or "(no reply)")
        self._messages.append(UserMessage(role="user", content=content))
        identity = revealed_items(self._identity, reply) - self._revealed
        self._revealed |= identity
        asked = requested_tools(text, self._goal_tool)  # only the calls the message asked for are its doing
        diagnostic = [e for e in events if e["new_reading"] and e["tool"] in self._diagnostic]
        readings = [e["tool"] for e in diagnostic if e["tool"] in asked]
        repairs = [self._expected[i].action_id for e in events if e["tool"] in asked for i in e["new_actions"]]
        unneeded = [e["tool"] for e in events if e["unneeded"] and e["tool"] in asked]
        undone = [e["tool"] for e in events if e["undone"] and e["tool"] in asked]
        news = bool(identity or readings or repairs)
        self._counts["repeats"] += int(repeat)
        self._counts["info_reveals"] += int(news)
        self._counts["unneeded_writes"] += len(unneeded)
        critique, rule = message_critique(self.settings, news=news, repeat=repeat, unneeded_write=bool(unneeded), undone_repair=bool(undone))
        if stop:
            critique, rule = end_critique(self.settings, (critique, rule), verified=self._verified)
            self._finish(STOP_TOKENS[stop])
        return self._step(
            prompts.customer_reply(reply, bool(stop)),
            critique,
            int(news),
            done=bool(stop),
            kind="message",
            rule=rule,
            repeat=repeat,
            customer_source=getattr(turn, "source", None),
            customer_stop=stop,
            customer_tools=[e["tool"] for e in events],
            requested_tools=sorted(asked),
            unneeded_writes=unneeded,
            undone_repairs=undone,
            new_identity=sorted(identity),
            new_readings=readings,
            new_actions=repairs,
        )

    def update(self, text: str, counterfactual: str | None = None) -> StepResult:
        raise RuntimeError("tau2 telecom has action rounds only (rounds == ('act',))")

    def answer(self, text: str) -> StepResult:
        if self._done:
            raise RuntimeError("the episode is over")
        payload = parsing.extract_payload(text, "answer")
        critique, rule = end_critique(self.settings, (0, "stop"), verified=self._verified) if payload.ok else (invalid_critique(self.settings), "invalid")
        if payload.ok:
            closing = payload.value
            content = AGENT_STOP_TOKEN if self.solo else (closing + "\n" + AGENT_STOP_TOKEN).strip()
            self._messages.append(AssistantMessage(role="assistant", content=content))
            self._finish("agent_stop")
        else:
            self._counts["invalid"] += 1
            self._finish("max_turns")
        return StepResult(
            feedback=prompts.answer_recorded(self.solo) if payload.ok else prompts.answer_invalid(payload.error),
            critique=critique,
            channel=Channel.AS,
            valid=payload.ok,
            done=True,
            info={"turn": self._turn, "kind": "answer", "rule": rule, "error": payload.error, "termination": self._termination,
                  "reward": self.reward()},  # fmt: skip
        )

    def _finish(self, reason: str) -> None:
        self._done = True
        self._termination = reason

    @property
    def termination(self) -> str:
        """How the episode ended (one of :data:`TERMINATIONS`); ``max_turns`` while it has not."""
        return self._termination or "max_turns"

    @property
    def stopped(self) -> bool:
        return self._termination is not None and self._termination != "max_turns"

    def official_reward(self) -> float:
        return official_reward(self.final_state, self._matched, self._messages) if self.stopped else 0.0

    def fractional_reward(self) -> float:
        return fractional_reward(self.final_state, self._matched, self._messages) if self.stopped else 0.0

    def reward(self) -> float:
        return self.official_reward() if self.reward_kind == "official" else self.fractional_reward()

    def simulation_run(self) -> SimulationRun:
        """The episode as tau2's ``SimulationRun``, for ``tau2.evaluator.evaluator.evaluate_simulation``."""
        reason = {None: TerminationReason.MAX_STEPS, "max_turns": TerminationReason.MAX_STEPS, "agent_stop": TerminationReason.AGENT_STOP}
        termination = reason.get(self._termination, TerminationReason.USER_STOP)
        messages = [m.model_copy(update={"turn_idx": i}) for i, m in enumerate(self._messages)]
        return SimulationRun(
            id=f"arew-{self.task_name}-{self.seed}",
            task_id=self.task.id,
            start_time=self._start_time,
            end_time=datetime.now().isoformat(),
            duration=time.perf_counter() - self._started,
            termination_reason=termination,
            messages=messages,
            seed=self.seed,
        )

    def proxies(self) -> dict[str, Any]:
        sides = {"assistant": [0, 0], "user": [0, 0]}
        for action, matched in zip(self._expected, self._matched, strict=True):
            sides[action.requestor][0] += 1
            sides[action.requestor][1] += int(matched)
        checks = self.final_state.checks() if self._done else []
        n_expected = len(self._expected)
        out: dict[str, Any] = {"as": list(self._as), **{k: float(v) for k, v in self._counts.items()}}
        out.update(
            turns=float(self._turn),
            expected_actions=float(n_expected),
            expected_actions_matched=float(sum(self._matched)),
            expected_actions_share=float(sum(self._matched) / n_expected) if n_expected else 0.0,
            assistant_repairs=float(sides["assistant"][1]),
            user_repairs=float(sides["user"][1]),
            assistant_repairs_share=float(sides["assistant"][1] / sides["assistant"][0]) if sides["assistant"][0] else 0.0,
            user_repairs_share=float(sides["user"][1] / sides["user"][0]) if sides["user"][0] else 0.0,
            assertions_met_share=float(sum(checks) / len(checks)) if checks else 0.0,
            reward_official=self.official_reward(),
            reward_fractional=self.fractional_reward(),
            reward=self.reward(),
        )
        for reason in TERMINATIONS:
            out[f"ended_{reason}"] = float(self.termination == reason)
        stats = getattr(self.customer, "stats", None)  # the customer's requests, fallbacks, tool calls (dual control)
        if stats is not None:
            out.update({k: v for k, v in stats.as_dict("customer_").items() if k not in out})  # the episode's own count wins
        return out
