"""The ``hf`` rollout backend: verl's server-mode rollout interface over plain transformers.

verl 0.9.1's rollouts are servers (vLLM, SGLang, TensorRT-LLM), all GPU-only. This backend
fits the same three places verl plugs a backend into:

- :class:`HFRolloutServer`, a Ray actor holding a copy of the policy. Agent loops call its
  ``generate`` through verl's ``LLMServerClient`` and get a ``TokenOutput`` (token ids, the
  sampled tokens' log-probs under the sampling temperature, ``global_steps``). The requests
  waiting when the model frees up are generated together, one left-padded batch per set of
  sampling settings (up to ``rollout.max_num_seqs`` requests and ``rollout.max_num_batched_tokens``
  padded prompt tokens), so throughput grows with the agent loops' concurrency. A batch of one
  is seeded from (rollout seed, request id, prompt length); with
  ``rollout.full_determinism=True`` every request is its own batch, verl passes the agent loop's
  stable request ids through, and a run replays exactly.
- :class:`HFReplica`, the ``RolloutReplica`` that starts one server per replica, on the node of
  the training worker it belongs to.
- :class:`HFServerAdapter`, the ``BaseRollout`` inside the training worker: on every weight sync
  it gathers the actor's full tensors and loads them into the server, then tags the server with
  the trainer's global step.

Sampling is transformers' ``generate`` (temperature, top-p, top-k, repetition penalty, stop
strings, max tokens), not vLLM's sampler: the same distribution, not the same random stream.

Partial rollouts (verl's ``colocate_async`` and other asynchronous trainers), as vLLM's server does
them: ``abort_all_requests`` pauses the server (no new batch starts) and stops the generate call in
progress at its next token, returning once it has stopped, so a weight load that follows never
overlaps generation. Each of its requests that had not ended on its own gets the tokens it has so
far, with their log-probs, and ``stop_reason="aborted"``; verl's ``FullyAsyncLLMServerClient`` then
resubmits prompt + those tokens with the rest of the budget. Requests waiting, and those arriving
while paused, wait for ``resume_generation`` and run under the weights loaded by then (with
``reject_request=True`` they are answered at once with an empty aborted output instead). Each
abort that cut something logs one INFO line ("hf rollout: aborted ..."); ``stats`` counts them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from arew.engines.hf_generation import Interrupt, generate_rows, generation_config

if TYPE_CHECKING:
    from transformers import GenerationConfig

logger = logging.getLogger(__name__)

BACKEND_NAME = "hf"
SUPPORTED_SAMPLING_KEYS = {
    "temperature", "top_p", "top_k", "max_tokens", "max_new_tokens", "stop", "logprobs", "repetition_penalty",
}  # fmt: skip


def _log_info_lines() -> None:
    """Lets this module's INFO lines (one per abort) through in a Ray actor, where the root logger is at WARNING
    (verl's logging setup) or has no handler at all; a level set for this logger by its process is kept."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logging.getLogger().handlers and not logger.handlers:  # else Python's last resort, WARNING and above
        handler = logging.StreamHandler()  # stderr, which Ray forwards to the driver and its worker logs
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


def server_actor_name(replica_rank: int) -> str:
    return f"{BACKEND_NAME}_server_{replica_rank}"


@dataclass
class _Request:
    prompt_ids: list[int]
    params: dict[str, Any]
    request_id: str
    budget: int  # new tokens it may have
    done: asyncio.Future
    # what must agree for requests to share one generate call (everything but the token budget)
    batch_key: tuple = field(init=False)

    def __post_init__(self):
        params = self.params
        self.batch_key = (
            float(params.get("temperature", 1.0)), float(params.get("top_p", 1.0)), int(params.get("top_k") or 0),
            float(params.get("repetition_penalty", 1.0)), tuple(params.get("stop") or ()),
        )  # fmt: skip


class HFRolloutServer:
    """One policy copy that generates token-in, token-out; its weights follow the actor's."""

    def __init__(
        self,
        model_path: str,
        tokenizer_path: str,
        trust_remote_code: bool,
        max_model_len: int,
        response_length: int,
        seed: int,
        max_batch: int = 1,
        max_batch_tokens: int | None = None,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        _log_info_lines()
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path, trust_remote_code=trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, torch_dtype=torch.float32, attn_implementation="sdpa", trust_remote_code=trust_remote_code
        ).eval()
        self.max_model_len = max_model_len
        self.response_length = response_length
        self.seed = seed
        if max_batch < 1:
            raise ValueError(f"actor_rollout_ref.rollout.max_num_seqs: the hf rollout batches up to this many requests; must be >= 1, got {max_batch}")
        self.max_batch = max_batch
        # a batch's padded prompt tokens (rows x longest prompt): long prompts are compute-bound on a CPU, and
        # batching them only adds padding; a request longer than this still runs, alone
        self.max_batch_tokens = max_batch_tokens
        self.global_steps: int | None = None
        self.requests = 0
        self.batches = 0
        self.largest_batch = 0
        self._waiting: list[_Request] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the serving loop's, made at the first request
        self._wake: asyncio.Event | None = None
        self.weight_loads = 0
        own = self.model.state_dict()
        # tied parameters (one storage under several names): a sync may send either name
        self._tied = {n for n, p in own.items() if any(p.data_ptr() == q.data_ptr() for m, q in own.items() if m != n)}
        self._lock = threading.Lock()  # one generate call at a time, and never during a weight load
        self._warned_keys: set[str] = set()
        # partial rollouts: abort_all_requests pauses and interrupts, resume_generation unpauses
        self._paused = False
        self._rejecting = False  # while paused: answer arrivals (and the waiting) at once, empty and aborted
        self._interrupt = Interrupt()  # stops the generate call in progress at its next token
        self._in_flight: asyncio.Future | None = None  # the batch being generated: (request id, tokens) of those it cut
        self._generating = 0  # requests in the generate call in progress
        self.aborted_requests = 0  # cut mid-generation, returned partial
        self.aborted_tokens = 0  # the tokens those returned
        self.rejected_requests = 0

    def _sampling(self, room: int, params: dict[str, Any]) -> GenerationConfig:
        unknown = set(params) - SUPPORTED_SAMPLING_KEYS - self._warned_keys
        if unknown:
            logger.warning("hf rollout ignores sampling parameters %s", sorted(unknown))
            self._warned_keys |= unknown
        return generation_config(
            self.model,
            self.tokenizer,
            max_new_tokens=room,
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k") or 0),
            repetition_penalty=float(params.get("repetition_penalty", 1.0)),
            stop=params.get("stop") or (),
            return_dict_in_generate=True,
            output_logits=True,
        )

    def _budget(self, prompt_len: int, params: dict[str, Any]) -> int:
        """New tokens this request may have: its max_tokens within what max_model_len leaves."""
        room = self.max_model_len - prompt_len
        if room < 1:
            raise ValueError(f"hf rollout: prompt of {prompt_len} tokens leaves no room within max_model_len={self.max_model_len}")
        return max(1, min(int(params.get("max_tokens", params.get("max_new_tokens")) or self.response_length), room))

    def _generate(self, batch: list[_Request]) -> tuple[list[tuple[list[int], list[float], bool]], int | None] | None:
        """Each request's (new tokens, their log-probs, whether it ended on its own) and the weights' global step;
        ``None`` when an abort came before the generate call began (the batch has not run)."""
        budgets = [r.budget for r in batch]
        config = self._sampling(max(budgets), batch[0].params)
        if len(batch) == 1:
            seed = zlib.crc32(f"{self.seed}:{batch[0].request_id}:{len(batch[0].prompt_ids)}".encode())
        else:
            seed = zlib.crc32(f"{self.seed}:{':'.join(r.request_id for r in batch)}".encode())
        with self._lock:
            if self._interrupt.is_set():
                return None
            self.requests += len(batch)
            self.batches += 1
            self.largest_batch = max(self.largest_batch, len(batch))
            global_steps = self.global_steps  # the weights cannot change before the lock is released
            self._generating = len(batch)
            try:
                tokens, logits, ended = generate_rows(
                    self.model, self.tokenizer, [r.prompt_ids for r in batch], config, seed, budgets, self._interrupt
                )
            finally:
                self._generating = 0
        temperature = float(batch[0].params.get("temperature", 1.0)) or 1.0
        results = []
        for row_tokens, row_logits, row_ended in zip(tokens, logits, ended):
            log_probs = torch.log_softmax(row_logits.float() / temperature, dim=-1).gather(-1, row_tokens[:, None]).squeeze(-1)
            results.append((row_tokens.tolist(), log_probs.tolist(), row_ended))
        return results, global_steps

    def _next_batch(self) -> list[_Request]:
        """The oldest waiting request and the next waiting ones with its sampling settings, in arrival order, up
        to max_batch requests and max_batch_tokens padded prompt tokens."""
        key = self._waiting[0].batch_key
        batch, longest = [], 0
        for request in self._waiting:
            if request.batch_key != key:
                continue
            width = max(longest, len(request.prompt_ids))
            if batch and (len(batch) == self.max_batch or (self.max_batch_tokens and (len(batch) + 1) * width > self.max_batch_tokens)):
                break
            batch.append(request)
            longest = width
        taken = {id(r) for r in batch}
        self._waiting = [r for r in self._waiting if id(r) not in taken]
        return batch

    async def _serve(self) -> None:
        """Runs for the actor's lifetime: generates what is waiting, in batches, one generate call at a time,
        none while paused."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting and not self._paused:
                batch = self._next_batch()
                self._interrupt.clear()
                stopped = self._in_flight = self._loop.create_future()
                cut: list[tuple[str, int]] = []
                try:
                    outcome = await asyncio.to_thread(self._generate, batch)
                except Exception as error:  # each caller gets the failure; the server goes on
                    for request in batch:
                        if not request.done.done():
                            request.done.set_exception(error)
                    continue
                else:
                    if outcome is None:  # aborted before it began: first in line again, for after the resume
                        self._waiting[:0] = batch
                        continue
                    results, global_steps = outcome
                    for request, (tokens, log_probs, ended) in zip(batch, results):
                        if not ended:
                            cut.append((request.request_id, len(tokens)))
                        if not request.done.done():
                            request.done.set_result((tokens, log_probs, "completed" if ended else "aborted", global_steps))
                    if cut:
                        kept = sum(n for _, n in cut)
                        self.aborted_requests += len(cut)
                        self.aborted_tokens += kept
                        logger.info("hf rollout: aborted %d requests mid-generation (%d tokens kept for their resumption)", len(cut), kept)
                finally:
                    self._in_flight = None
                    if not stopped.done():
                        stopped.set_result(cut)

    def _new_future(self) -> asyncio.Future:
        """A new request's future, on the running loop; the serving loop started there if this is its first request."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the first request (a Ray actor keeps one loop; a script may run several)
            self._loop, self._wake = loop, asyncio.Event()
            self._server_task = loop.create_task(self._serve())
        return loop.create_future()

    async def generate(self, prompt_ids, sampling_params: dict[str, Any], request_id: str, **kwargs) -> TokenOutput:
        if any(kwargs.get(key) is not None for key in ("image_data", "video_data", "audio_data")):
            raise ValueError("actor_rollout_ref.rollout.name=hf: the hf rollout takes text only, no multi-modal inputs; use vllm or sglang")
        params = dict(sampling_params)
        prompt = [int(t) for t in prompt_ids]
        budget = self._budget(len(prompt), params)  # a prompt without room fails its own request, not a batch
        if self._paused and self._rejecting:
            self.rejected_requests += 1
            tokens, log_probs, stop_reason, global_steps = [], [], "aborted", self.global_steps
        else:  # while paused it waits in the queue until resume_generation
            request = _Request(prompt, params, str(request_id), budget, self._new_future())
            self._waiting.append(request)
            self._wake.set()
            tokens, log_probs, stop_reason, global_steps = await request.done
        return TokenOutput(
            token_ids=tokens,
            log_probs=log_probs if params.get("logprobs", False) else None,
            stop_reason=stop_reason,
            extra_fields={"global_steps": global_steps},
        )

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        """Pause, and stop the generate call in progress at its next token; returns once it has stopped.

        Its requests that had not ended on their own are answered with their tokens so far and
        ``stop_reason="aborted"``; the others as usual. Waiting requests, and those arriving until
        :meth:`resume_generation`, stay queued; with ``reject_request`` they are answered at once with an
        empty aborted output instead. Nothing is cached between requests, so ``reset_prefix_cache`` has
        nothing to clear. Returns the answered-aborted requests, as vLLM's server does."""
        self._paused, self._rejecting = True, reject_request
        cut: list[tuple[str, int]] = []
        if self._in_flight is not None and self._in_flight.get_loop() is asyncio.get_running_loop():
            self._interrupt.set()
            cut = await asyncio.shield(self._in_flight)
        request_ids = [request_id for request_id, _ in cut]
        if reject_request and self._waiting:
            rejected, self._waiting = self._waiting, []
            for request in rejected:
                if not request.done.done():
                    request.done.set_result(([], [], "aborted", self.global_steps))
            self.rejected_requests += len(rejected)
            request_ids += [request.request_id for request in rejected]
            logger.info("hf rollout: rejected %d waiting requests (paused with reject_request=True)", len(rejected))
        return {"aborted_count": len(request_ids), "request_ids": request_ids}

    async def resume_generation(self) -> None:
        """Unpause: the waiting requests run, under the weights loaded now."""
        self._paused = self._rejecting = False
        if self._wake is not None:
            self._wake.set()

    def _load(self, state: dict[str, torch.Tensor]) -> None:
        own = self.model.state_dict()
        unknown = sorted(set(state) - set(own))
        if unknown:
            raise KeyError(f"hf rollout: the actor sent weights the rollout model does not have: {unknown[:5]}")
        missing = sorted(set(own) - set(state) - self._tied)
        if missing:
            raise KeyError(f"hf rollout: the weight sync did not include {missing[:5]}")
        with self._lock, torch.no_grad():
            self.model.load_state_dict(state, strict=False)
            self.weight_loads += 1

    async def update_weights(self, state: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        await asyncio.to_thread(self._load, state)
        if global_steps is not None:
            self.global_steps = global_steps

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests, "batches": self.batches, "largest_batch": self.largest_batch,
            "weight_loads": self.weight_loads, "global_steps": self.global_steps,
            "aborted_requests": self.aborted_requests, "aborted_tokens": self.aborted_tokens, "rejected_requests": self.rejected_requests,
            "paused": self._paused, "waiting": len(self._waiting),
            "generating": self._generating, "generating_tokens": self._interrupt.tokens if self._generating else 0,
        }  # fmt: skip

    async def _nothing(self, *args, **kwargs) -> None:
        """The weights stay resident and nothing is cached between requests: memory calls have nothing to do."""

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = _nothing
    start_profile = stop_profile = _nothing


class HFReplica(RolloutReplica):
    """One :class:`HFRolloutServer` per replica, placed on its training worker's node."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.world_size != 1:
            raise ValueError(
                "actor_rollout_ref.rollout: the hf backend runs each replica in one process; set "
                f"tensor_model_parallel_size, data_parallel_size and pipeline_model_parallel_size to 1 (world size {self.world_size})"
            )

    async def launch_servers(self):
        if self.rollout_mode is None or not self.workers:
            raise ValueError("actor_rollout_ref.hybrid_engine: the hf rollout runs only inside the training workers; keep hybrid_engine=True")
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        config, model = self.config, omega_conf_to_dataclass(self.model_config)
        server = (
            ray.remote(HFRolloutServer)
            .options(
                name=server_actor_name(self.replica_rank) + self.name_suffix,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
                max_concurrency=self.max_concurrency,
                num_cpus=0,
            )
            .remote(
                model_path=model.local_path,
                tokenizer_path=model.local_tokenizer_path,
                trust_remote_code=model.trust_remote_code,
                max_model_len=config.max_model_len or config.prompt_length + config.response_length,
                response_length=config.response_length,
                seed=config.seed + self.replica_rank if config.seed is not None else self.replica_rank,
                max_batch=1 if config.full_determinism else config.max_num_seqs,
                max_batch_tokens=config.max_num_batched_tokens,
            )
        )
        await server.stats.remote()  # surfaces a failed model load here, not at the first request
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"{BACKEND_NAME}-replica-{self.replica_rank}{self.name_suffix}"


class HFServerAdapter(BaseRollout):
    """Inside the training worker: hands the actor's weights to its replica's server on every sync."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1, **kwargs):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", 0))
        self.replica_rank = rank if replica_rank == -1 else replica_rank  # one process per replica
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, global_steps: int | None = None, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise ValueError(f"actor_rollout_ref.rollout.checkpoint_engine.backend: the hf rollout takes full tensors (backend naive), got wire format {wire_format!r}")
        if kwargs.get("peft_config") is not None:
            raise ValueError("actor_rollout_ref.model.lora.merge: the hf rollout takes LoRA weights merged only; set it to True")
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        await self._server_handle().update_weights.remote(state, global_steps)
