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

from arew.hf_generation import generate_batch, generation_config

if TYPE_CHECKING:
    from transformers import GenerationConfig

logger = logging.getLogger(__name__)

BACKEND_NAME = "hf"
SUPPORTED_SAMPLING_KEYS = {
    "temperature", "top_p", "top_k", "max_tokens", "max_new_tokens", "stop", "logprobs", "repetition_penalty",
}  # fmt: skip


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

    def _generate(self, batch: list[_Request]) -> list[tuple[list[int], list[float]]]:
        budgets = [r.budget for r in batch]
        config = self._sampling(max(budgets), batch[0].params)
        if len(batch) == 1:
            seed = zlib.crc32(f"{self.seed}:{batch[0].request_id}:{len(batch[0].prompt_ids)}".encode())
        else:
            seed = zlib.crc32(f"{self.seed}:{':'.join(r.request_id for r in batch)}".encode())
        with self._lock:
            self.requests += len(batch)
            self.batches += 1
            self.largest_batch = max(self.largest_batch, len(batch))
            tokens, logits = generate_batch(self.model, self.tokenizer, [r.prompt_ids for r in batch], config, seed, budgets)
        temperature = float(batch[0].params.get("temperature", 1.0)) or 1.0
        results = []
        for row_tokens, row_logits in zip(tokens, logits):
            log_probs = torch.log_softmax(row_logits.float() / temperature, dim=-1).gather(-1, row_tokens[:, None]).squeeze(-1)
            results.append((row_tokens.tolist(), log_probs.tolist()))
        return results

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
        """Runs for the actor's lifetime: generates what is waiting, in batches, one generate call at a time."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting:
                batch = self._next_batch()
                try:
                    results = await asyncio.to_thread(self._generate, batch)
                except Exception as error:  # each caller gets the failure; the server goes on
                    for request in batch:
                        if not request.done.done():
                            request.done.set_exception(error)
                    continue
                for request, result in zip(batch, results):
                    if not request.done.done():
                        request.done.set_result(result)

    async def generate(self, prompt_ids, sampling_params: dict[str, Any], request_id: str, **kwargs) -> TokenOutput:
        if any(kwargs.get(key) is not None for key in ("image_data", "video_data", "audio_data")):
            raise ValueError("actor_rollout_ref.rollout.name=hf: the hf rollout takes text only, no multi-modal inputs; use vllm or sglang")
        params = dict(sampling_params)
        prompt = [int(t) for t in prompt_ids]
        budget = self._budget(len(prompt), params)  # a prompt without room fails its own request, not a batch
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the first request (a Ray actor keeps one loop; a script may run several)
            self._loop, self._wake = loop, asyncio.Event()
            self._server_task = loop.create_task(self._serve())
        request = _Request(prompt, params, str(request_id), budget, loop.create_future())
        self._waiting.append(request)
        self._wake.set()
        tokens, log_probs = await request.done
        return TokenOutput(
            token_ids=tokens,
            log_probs=log_probs if params.get("logprobs", False) else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

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
        }  # fmt: skip

    async def _nothing(self, *args, **kwargs) -> None:
        """The weights stay resident and nothing is cached between requests: memory calls have nothing to do."""

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = _nothing
    abort_all_requests = resume_generation = start_profile = stop_profile = _nothing


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
