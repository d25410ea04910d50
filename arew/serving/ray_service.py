"""The simulated user's server as Ray actors that hold its GPUs: started, watched, restarted, stopped.

Where it hooks in: every AReW trainer mode (:class:`arew.verl_plugin.trainer.AReWStage`) calls
:func:`start_user_service` first thing in its constructor. verl builds that trainer inside its
``TaskRunner`` actor after resolving the config and before it reserves any GPU for its own
workers or starts an agent-loop worker; so the service's placement group takes its GPUs before
verl's resource pools ask for theirs (no GPU is booked twice), and the URL written into
``arew_agent.env_options`` is in the very config object verl then hands to every agent-loop
worker, on every node. The entry point stays ``python -m verl.trainer.main_ppo``; no verl code
is wrapped or patched. The trainer stops the service when ``fit`` returns or raises; when the
job is cancelled or its driver dies, Ray kills the actors (they are owned by the ``TaskRunner``)
and each server process, started with ``PR_SET_PDEATHSIG``, is killed with its actor.

verl 0.9.1 has no facility for a standalone server outside its own rollout: its
``RolloutReplica`` servers (``verl/workers/rollout/replica.py``) are the policy's engines, placed
in the trainer's resource pools and driven by its weight sync; nothing there serves a second,
frozen model. So the service is plain Ray: one placement group with a bundle of
``tensor_parallel_size`` GPUs per replica, one actor per bundle, and in each actor the server
as a subprocess on a free port of that node, watched by a thread that restarts it (same port,
same URL) when it exits, up to ``max_restarts`` times per replica, each restart logged with the
replica's number and counted (``user_service/restarts``: all replicas' restarts;
``user_service/replicas_up``: replicas whose server is running). With ``replicas`` > 1 the
replicas' URLs reach the env options joined by commas, and the client
(:mod:`arew.chat.client`) spreads requests over them under its one concurrency limit, with a
circuit breaker per replica: while one replica is down or restarting its requests in flight are
retried on the others, and only when every replica fails do episodes fall back to the offline
user (``episode/proxy_user_fallbacks/mean``).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from arew.serving.spec import SECTION, ServiceSettings, check_gpu_budget, llm_user_options

logger = logging.getLogger("arew.serving")
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not glibc: the actor's stop() and Ray's cleanup still apply
        pass


def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """One server subprocess on a fixed port, restarted when it exits (no Ray: testable alone)."""

    def __init__(self, command: str, env: dict[str, str], health_url: str, log_path: Path, settings: ServiceSettings, name: str = "user server"):
        self.command, self.env, self.health_url, self.log_path = command, env, health_url, Path(log_path)
        self.settings, self.name = settings, name
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self.failed: str | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None

    def _launch(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["bash", "-c", self.command], env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout
        while not self._stopping.is_set():
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"{self.name} exited with status {code} before it was healthy; last log lines ({self.log_path}):\n{self.log_tail()}")
            if healthy(self.health_url):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name} not healthy at {self.health_url} after {SECTION}.startup_timeout={self.settings.startup_timeout:g} s; "
                    f"last log lines ({self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def start(self) -> None:
        self._launch()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        logger.info("%s healthy at %s (pid %d)", self.name, self.health_url, self.process.pid)
        self._monitor = threading.Thread(target=self._watch, name="arew-user-server-monitor", daemon=True)
        self._monitor.start()

    def _watch(self) -> None:
        while not self._stopping.wait(self.settings.poll_interval):
            with self._lock:
                if self._stopping.is_set() or self.process.poll() is None:
                    continue
                code = self.process.returncode
                if self.restarts >= self.settings.max_restarts:
                    self.failed = f"exited with status {code} after {self.restarts} restarts ({SECTION}.max_restarts={self.settings.max_restarts})"
                    logger.error("%s %s; not restarted again; last log lines:\n%s", self.name, self.failed, self.log_tail())
                    return
                self.restarts += 1
                logger.warning("%s died (status %s); restart %d of at most %d", self.name, code, self.restarts, self.settings.max_restarts)
                self._launch()
            try:
                self._wait_healthy()
                logger.warning("%s healthy again after restart %d (pid %d)", self.name, self.restarts, self.process.pid)
            except (RuntimeError, TimeoutError) as error:  # the next poll sees it dead and tries again
                logger.error("%s restart %d did not come up: %s", self.name, self.restarts, error)
                if self.process.poll() is None:
                    self._kill()

    def _kill(self, grace: float = 15.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._kill()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=10)

    def status(self) -> dict[str, Any]:
        process = self.process
        return {
            "pid": process.pid if process else None,
            "alive": bool(process and process.poll() is None),
            "restarts": self.restarts,
            "failed": self.failed,
            "log": str(self.log_path),
        }


@ray.remote(max_restarts=0, max_concurrency=4)  # threaded: status() answers while start() waits for health
class UserServerActor:
    """One replica: the server process on this actor's node, with the GPUs Ray gave this actor."""

    def __init__(self, settings: dict[str, Any], model: str, replica: int, log_dir: str):
        self.settings = ServiceSettings(**settings)
        self.model, self.replica, self.log_dir = model, replica, log_dir
        self.server: ServerProcess | None = None
        self.url: str | None = None

    def start(self) -> str:
        host = getattr(ray._private.worker.global_worker, "node_ip_address", None) or ray.util.get_node_ip_address()  # the node's Ray address
        port = free_port()
        # PYTHON: the default command runs vLLM with this actor's interpreter (the environment AReW is installed in)
        env = {**os.environ, "PORT": str(port), "MODEL": self.model, "TP": str(self.settings.tensor_parallel_size), "HOST": host,
               "PYTHON": sys.executable}  # fmt: skip
        log_path = Path(self.log_dir) / f"replica{self.replica}-{port}.log"
        name = f"user server replica {self.replica} ({self.model}, {host}:{port}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')})"
        self.server = ServerProcess(self.settings.server_command(), env, f"http://{host}:{port}{self.settings.health_path}", log_path, self.settings, name)
        self.server.start()
        self.url = f"http://{host}:{port}/v1"
        return self.url

    def status(self) -> dict[str, Any]:
        return {"url": self.url, **(self.server.status() if self.server else {"alive": False, "restarts": 0, "failed": None})}

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class UserService:
    """The replicas of one run, from the caller's side (verl's ``TaskRunner``)."""

    def __init__(self, settings: ServiceSettings, model: str, log_dir: str | None = None):
        self.settings, self.model = settings, model
        self.log_dir = log_dir or os.path.join(tempfile.gettempdir(), "arew_user_server", ray.get_runtime_context().get_job_id())
        self.actors: list = []
        self.urls: list[str] = []
        self.group = None

    def start(self) -> list[str]:
        settings = self.settings
        bundle = {"GPU": float(settings.tensor_parallel_size)}
        if settings.cpus_per_replica:
            bundle["CPU"] = float(settings.cpus_per_replica)
        self.group = placement_group([dict(bundle) for _ in range(settings.replicas)], strategy=settings.placement, name=f"arew_user_service_{uuid.uuid4().hex[:8]}")
        try:
            ray.get(self.group.ready(), timeout=settings.startup_timeout)
        except ray.exceptions.GetTimeoutError:
            self.stop()
            raise RuntimeError(
                f"{SECTION}: Ray could not reserve {settings.replicas} x {bundle} ({SECTION}.placement={settings.placement}) "
                f"within {settings.startup_timeout:g} s; the cluster has {ray.cluster_resources()} in all, "
                f"{ray.available_resources()} free"
            ) from None
        fields = {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings)}  # not its ClassVars
        for replica in range(settings.replicas):
            strategy = PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=replica)
            self.actors.append(
                UserServerActor.options(
                    num_gpus=settings.tensor_parallel_size, num_cpus=settings.cpus_per_replica, scheduling_strategy=strategy,
                    name=f"arew_user_server_{ray.get_runtime_context().get_job_id()}_{replica}",
                ).remote(fields, self.model, replica, self.log_dir)
            )  # fmt: skip
        try:
            self.urls = ray.get([actor.start.remote() for actor in self.actors])
        except BaseException:
            self.stop()
            raise
        logger.warning("%s: %d replica(s) of %s healthy at %s", SECTION, len(self.urls), self.model, ", ".join(self.urls))
        return self.urls

    def status(self) -> list[dict[str, Any]]:
        return ray.get([actor.status.remote() for actor in self.actors], timeout=30)

    def metrics(self) -> dict[str, float]:
        try:
            status = self.status()
        except Exception as error:  # a metric must not stop training
            logger.warning("%s: status unavailable: %s", SECTION, error)
            return {"user_service/replicas_up": 0.0}
        return {
            "user_service/restarts": float(sum(s.get("restarts", 0) for s in status)),
            "user_service/replicas_up": float(sum(bool(s.get("alive")) for s in status)),
        }

    def stop(self) -> None:
        """Stop every replica's server, then release the actors and their GPUs (idempotent)."""
        if self.actors:
            try:
                ray.get([actor.stop.remote() for actor in self.actors], timeout=60)
            except Exception as error:
                logger.warning("%s: a replica did not stop cleanly (%s); killing its actor", SECTION, error)
            for actor in self.actors:
                ray.kill(actor)
            logger.warning("%s: user server stopped (%d replica(s))", SECTION, len(self.actors))
            self.actors = []
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None


def start_user_service(config) -> UserService | None:
    """With ``arew_user_service.mode=ray`` and a task whose environment options ask for an LLM user:
    check the GPU budget, start the service and write its URL(s) and model into
    ``arew_agent.env_options`` (in place, before verl starts its workers). None otherwise."""
    from omegaconf import open_dict

    settings = ServiceSettings.from_config(config.get(SECTION))
    if settings.mode != "ray":
        return None
    env_options = config.arew_agent.env_options
    keys = llm_user_options(env_options)
    if keys is None:
        logger.warning("%s.mode=ray, but arew_agent.env_options ask for no LLM user: no server started", SECTION)
        return None
    url_key, model_key = keys
    model = settings.model or env_options.get(model_key)
    if not model:
        raise ValueError(f"{SECTION}.model: no model to serve (arew_agent.env_options.{model_key} is empty too)")
    trainer = config.trainer
    warning = check_gpu_budget(
        trainer.nnodes * trainer.n_gpus_per_node, settings.gpus, ray.cluster_resources().get("GPU", 0.0), "trainer.nnodes * trainer.n_gpus_per_node"
    )
    if warning:
        logger.warning(warning)
    service = UserService(settings, model)
    urls = service.start()
    with open_dict(env_options):
        env_options[url_key] = ",".join(urls)
        env_options[model_key] = model
    return service
