"""The user service in a local Ray, without verl's trainer: a fake server scheduled on a (logical) GPU,
restarted when it dies, stopped with its owner, and the start-up checks and config keys."""

from __future__ import annotations

import math
import os
import signal
import sys
from pathlib import Path

import pytest
import ray
from omegaconf import OmegaConf
from ray._raylet import PlacementGroupID
from ray.util.placement_group import PlacementGroup

from arew.configs import CONFIG_DIR
from arew.serving.ray_service import UserService, healthy, start_user_service
from arew.serving.spec import SECTION, ServiceSettings, check_batch_layout, check_gpu_budget, llm_user_options
from fakes import wait_until

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import this test module
FAKE = ROOT / "tests" / "ray" / "fake_user_server.py"
BASE = OmegaConf.load(CONFIG_DIR / "base" / "arew.yaml")


def fake_command(folder: Path) -> str:
    return f"FAKE_USER_DIR={folder} exec {sys.executable} {FAKE}"


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def settings(**changes) -> ServiceSettings:
    return ServiceSettings(**{"mode": "ray", "startup_timeout": 60.0, "poll_interval": 0.2, "cpus_per_replica": 0.5, **changes})


def test_dead_server_is_restarted_on_the_same_url_and_counted(local_ray, tmp_path, process_alive):
    service = UserService(settings(command=fake_command(tmp_path), max_restarts=2), "fake-patient", str(tmp_path / "logs"))
    [url] = service.start()
    try:
        assert url.endswith("/v1") and healthy(url[: -len("/v1")] + "/health")
        [status] = service.status()
        first = status["pid"]
        assert status["alive"] and status["restarts"] == 0 and service.metrics()["user_service/restarts"] == 0
        os.kill(first, signal.SIGKILL)  # the server dies mid-run
        status = wait_until(lambda: next((s for s in service.status() if s["restarts"] == 1 and s["alive"]), None), "a restart")
        assert status["pid"] != first and status["url"] == url and status["failed"] is None
        wait_until(lambda: healthy(url[: -len("/v1")] + "/health"), "health after the restart")
        assert service.metrics() == {"user_service/restarts": 1.0, "user_service/replicas_up": 1.0}
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert pids == [first, status["pid"]]
    finally:
        service.stop()
    assert not process_alive(pids[-1])
    wait_until(lambda: ray.available_resources().get("GPU") == 2, "the placement group to be removed")


def test_two_replicas_each_on_its_gpu_and_port_restarted_alone(local_ray, tmp_path, process_alive):
    service = UserService(settings(command=fake_command(tmp_path), replicas=2, max_restarts=1), "fake-patient", str(tmp_path / "logs"))
    urls = service.start()
    try:
        assert len(set(urls)) == 2 and all(healthy(u[: -len("/v1")] + "/health") for u in urls)
        assert ray.available_resources().get("GPU", 0) == 0  # a bundle of tensor_parallel_size=1 GPU each
        first = service.status()
        os.kill(first[0]["pid"], signal.SIGKILL)  # replica 0's server dies; replica 1 is left alone
        wait_until(lambda: service.status()[0]["restarts"] == 1 and service.status()[0]["alive"], "replica 0's restart")
        after = service.status()
        assert after[0]["url"] == urls[0] and after[0]["pid"] != first[0]["pid"]
        assert after[1] == first[1]  # same pid, no restart
        assert service.metrics() == {"user_service/restarts": 1.0, "user_service/replicas_up": 2.0}
    finally:
        service.stop()
    assert not any(process_alive(s["pid"]) for s in after)
    wait_until(lambda: ray.available_resources().get("GPU") == 2, "both bundles to be released")


def test_restarts_stop_at_max_restarts(local_ray, tmp_path):
    service = UserService(settings(command=fake_command(tmp_path), max_restarts=0), "fake-patient", str(tmp_path / "logs"))
    service.start()
    try:
        os.kill(service.status()[0]["pid"], signal.SIGKILL)
        status = wait_until(lambda: next((s for s in service.status() if s["failed"]), None), "the failure to be reported")
        assert status["restarts"] == 0 and "max_restarts=0" in status["failed"] and not status["alive"]
        assert service.metrics()["user_service/replicas_up"] == 0
    finally:
        service.stop()


def test_a_server_that_exits_at_start_fails_with_its_log(local_ray, tmp_path):
    service = UserService(settings(command="echo model not found >&2; exit 3"), "missing", str(tmp_path / "logs"))
    with pytest.raises(ray.exceptions.RayTaskError, match="exited with status 3 before it was healthy(.|\n)*model not found"):
        service.start()
    service.stop()
    wait_until(lambda: ray.available_resources().get("GPU") == 2, "the placement group to be removed")


@ray.remote(num_cpus=0.1)
class Owner:
    """Stands in for verl's TaskRunner: it starts the service and is then killed (a cancelled job)."""

    def start(self, folder: str) -> int:
        self.service = UserService(settings(command=fake_command(Path(folder))), "fake-patient", folder + "/logs")
        self.service.start()
        return self.service.status()[0]["pid"]


def test_server_dies_with_its_owner(local_ray, tmp_path, process_alive):
    owner = Owner.remote()
    pid = ray.get(owner.start.remote(str(tmp_path)))
    assert process_alive(pid)
    ray.kill(owner)  # no stop(): Ray kills the owner's actors, the server goes with its actor
    wait_until(lambda: not process_alive(pid), "the server to die with its actor")
    # the placement group belongs to the job: Ray removes it when the job ends; this one goes on
    for group_id, group in ray.util.placement_group_table().items():
        if group["name"].startswith("arew_user_service") and group["state"] == "CREATED":
            ray.util.remove_placement_group(PlacementGroup(PlacementGroupID(bytes.fromhex(group_id))))
    wait_until(lambda: ray.available_resources().get("GPU") == 2, "the GPU to be released")


def _config(task_options: dict, gpus_per_node: int, **service) -> OmegaConf:
    return OmegaConf.create(
        {
            SECTION: {**OmegaConf.to_container(BASE[SECTION], resolve=True), **service},
            "arew_agent": {"env_options": task_options},
            "trainer": {"nnodes": 1, "n_gpus_per_node": gpus_per_node},
        }
    )


def test_start_user_service_hands_the_url_to_the_env_options(local_ray, tmp_path):
    config = _config({"customer": "llm", "customer_url": "http://127.0.0.1:8000/v1", "customer_model": "cust"}, 1,
                     mode="ray", command=fake_command(tmp_path), replicas=1, poll_interval=0.2)  # fmt: skip
    service = start_user_service(config)
    try:
        options = config.arew_agent.env_options
        assert options.customer_url == service.urls[0] != "http://127.0.0.1:8000/v1" and options.customer_model == "cust"
    finally:
        service.stop()


def test_start_user_service_joins_the_replicas_urls(local_ray, tmp_path):
    config = _config({"user": "llm", "user_url": "http://127.0.0.1:8000/v1", "user_model": "m"}, 0,
                     mode="ray", command=fake_command(tmp_path), replicas=2, poll_interval=0.2)  # fmt: skip
    service = start_user_service(config)
    try:
        from arew.envs.users.llm import LLMUserConfig

        assert config.arew_agent.env_options.user_url == ",".join(service.urls) and len(service.urls) == 2
        assert LLMUserConfig(url=config.arew_agent.env_options.user_url).endpoints == tuple(u + "/chat/completions" for u in service.urls)
    finally:
        service.stop()


def test_start_user_service_checks_the_gpu_budget(local_ray, tmp_path):
    config = _config({"user": "llm", "user_model": "m"}, 2, mode="ray", command=fake_command(tmp_path))
    with pytest.raises(ValueError, match=r"trainer.nnodes \* trainer.n_gpus_per_node = 2 training GPUs \+ .* = 1 user-server GPUs = 3.*has 2 GPUs.*at most 1"):
        start_user_service(config)
    two = _config({"user": "llm", "user_model": "m"}, 1, mode="ray", command=fake_command(tmp_path), replicas=2)
    with pytest.raises(ValueError, match=r"= 1 training GPUs \+ arew_user_service.replicas \* arew_user_service.tensor_parallel_size = 2 user-server GPUs = 3.*at most 0"):
        start_user_service(two)
    assert start_user_service(_config({"user": "offline"}, 2, mode="ray")) is None  # no LLM user: nothing to start
    assert start_user_service(_config({"user": "llm"}, 2, mode="external")) is None


def test_gpu_budget_and_batch_arithmetic():
    assert check_gpu_budget(7, 1, 8, "t") is None
    assert "2 GPUs stay idle" in check_gpu_budget(14, 0, 16, "t")
    with pytest.raises(ValueError, match="arew_user_service.replicas"):
        check_gpu_budget(16, 2, 16, "t")
    check_batch_layout(252, 126, 3, 14)
    check_batch_layout(224, 112, 1, 28)
    with pytest.raises(ValueError, match=r"actor_rollout_ref.actor.ppo_mini_batch_size: 126 \* actor_rollout_ref.rollout.n 1 .* 28 training GPUs; use a multiple of 28 \(e.g. 112\)"):
        check_batch_layout(252, 126, 1, 28)
    with pytest.raises(ValueError, match=r"data.train_batch_size: 250"):
        check_batch_layout(250, 125, 1, 4)
    with pytest.raises(ValueError, match="not a multiple of"):
        check_batch_layout(12, 8, 1, 4)
    assert llm_user_options({"user": "llm"}) == ("user_url", "user_model")
    assert llm_user_options({"customer": "llm"}) == ("customer_url", "customer_model")
    assert llm_user_options({"user": "offline"}) is None


def test_yaml_defaults_equal_code_defaults(monkeypatch):
    for name in ("AREW_USER_SERVICE", "AREW_USER_SERVER_CMD"):
        monkeypatch.delenv(name, raising=False)
    assert ServiceSettings.from_config(OmegaConf.to_container(BASE[SECTION], resolve=True)) == ServiceSettings()


INVALID = ["bogus", ["as"], {"a": 1}, math.nan, math.inf, -1, 2.5, True, None, ""]


@pytest.mark.parametrize("key", list(ServiceSettings.__dataclass_fields__))
def test_every_key_rejects_invalid_values_naming_itself(key, monkeypatch):
    monkeypatch.delenv("AREW_USER_SERVICE", raising=False)
    rejected = 0
    for value in INVALID:
        raw = {**OmegaConf.to_container(BASE[SECTION], resolve=True), key: value}
        try:
            ServiceSettings.from_config(raw)
        except ValueError as error:
            assert f"{SECTION}.{key}" in str(error), (value, str(error))
            rejected += 1
    assert rejected >= 3
    with pytest.raises(ValueError, match=r"arew_user_service\.gpus: unknown key"):
        ServiceSettings.from_config({"gpus": 2})
