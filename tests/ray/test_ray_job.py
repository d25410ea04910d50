"""``launch/submit_ray_job.sh`` against a real Ray cluster on loopback: a CPU smoke run of verl's real
trainer as a Ray job (``arew smoke --cluster``), a MediQ run whose simulated user is a stand-in
server scheduled by the user service on the cluster's second (logical) GPU, a failing job, and a
MediQ job cancelled with ``ray job stop`` once its user server is up (the server and its placement
group must go with it).

The cluster is started here with its own ports and temp dir (16 logical CPUs, 2 logical GPUs) and
stopped by killing exactly the processes it started (``ray stop`` would stop every Ray on the machine).
Each training job takes one to three minutes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model
from arew.serving.ray_service import free_port, healthy
from fakes import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.e2e]  # Ray jobs whose entrypoint is main_ppo

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = ROOT / "launch" / "submit_ray_job.sh"
FAKE = ROOT / "tests" / "ray" / "fake_user_server.py"
BIN = Path(sys.executable).parent
JOB_TIMEOUT = 900


def _processes() -> dict[int, tuple[str, int]]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                parent = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            table[int(name)] = (command, parent)
    return table


def _cluster_processes(temp_dir: str) -> set[int]:
    """The processes of the cluster in ``temp_dir``: those naming it, and their descendants."""
    table = _processes()
    ours = {pid for pid, (command, _) in table.items() if temp_dir in command and pid != os.getpid()}
    grown = True
    while grown:
        children = {pid for pid, (_, parent) in table.items() if parent in ours} - ours
        ours |= children
        grown = bool(children)
    return ours


@pytest.fixture(scope="module")
def cluster(process_alive):
    temp_dir = tempfile.mkdtemp(prefix="arew-ray-")  # short: Ray's socket paths must fit in 107 bytes
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PATH": f"{BIN}:{os.environ['PATH']}"}  # a loopback-only cluster
    dashboard = free_port()
    ports = ["--port", str(free_port()), "--dashboard-port", str(dashboard), "--dashboard-agent-listen-port", str(free_port()),
             "--ray-client-server-port", str(free_port())]  # fmt: skip
    start = [str(BIN / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1", *ports,
             "--temp-dir", temp_dir, "--num-cpus", "16", "--num-gpus", "2", "--include-dashboard=true", "--disable-usage-stats"]  # fmt: skip
    try:
        subprocess.run(start, env=env, check=True, capture_output=True, text=True, timeout=120)
        yield {**env, "RAY_ADDRESS": f"http://127.0.0.1:{dashboard}"}
    finally:
        started = _cluster_processes(temp_dir)
        for pid in started:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        while any(process_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in started:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _submit(env: dict, *args: str, job_id: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SUBMIT), *args], env={**env, "AREW_JOB_ID": job_id, **extra_env}, cwd=ROOT,
        capture_output=True, text=True, timeout=JOB_TIMEOUT,
    )  # fmt: skip


def _steps(folder: Path) -> list[dict]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return [{**e["data"], "step": e["step"]} for e in map(json.loads, lines) if "training/global_step" in e["data"]]


def test_smoke_run_as_a_ray_job(cluster, tmp_path):
    result = _submit(cluster, "--smoke", "--out", str(tmp_path / "run"), "--quiet", job_id="arew-test-smoke")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "job arew-test-smoke SUCCEEDED" in result.stderr
    steps = _steps(tmp_path / "run")
    assert [s["step"] for s in steps] == [1, 2]
    for step in steps:
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0 and "arew/as/pos" in step
        assert "user_service/restarts" not in step  # PE has no LLM user: no service
    assert "arew smoke: 2 training steps" in result.stdout  # the job's logs came back


def test_failed_job_returns_non_zero(cluster, tmp_path):
    result = _submit(cluster, "--smoke", "--out", str(tmp_path / "run"), "--quiet", "no_such_key=1", job_id="arew-test-fails")
    assert result.returncode == 1 and "job arew-test-fails FAILED" in result.stderr


def test_mediq_with_the_user_server_as_a_ray_service(cluster, tmp_path, mediq_source, process_alive):
    """The agent asks a question every turn (scripted model), so the patient is called: by the stand-in
    server the service started on the cluster's second GPU, which is stopped when the run ends."""
    question = "<interact>Do you have a fever?</interact>"
    tokenizer = build_chat_tokenizer(extra_text=[question] * 50)
    build_scripted_model(tokenizer, question).save_pretrained(tmp_path / "scripted")
    tokenizer.save_pretrained(tmp_path / "scripted")
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    result = _submit(
        cluster, "--smoke", "--task", "mediq", "--steps", "1", "--source", str(mediq_source), "--model", str(tmp_path / "scripted"),
        "--out", str(tmp_path / "run"), "--quiet", "data.max_prompt_length=4096",
        job_id="arew-test-mediq", AREW_USER_SERVER_CMD=f"FAKE_USER_DIR={fake_dir} exec {sys.executable} {FAKE}",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    [step] = _steps(tmp_path / "run")
    assert step["user_service/replicas_up"] == 1 and step["user_service/restarts"] == 0
    requests = (fake_dir / "requests").read_text().splitlines()
    assert requests and set(requests) == {"Qwen/Qwen2.5-14B-Instruct"}  # the task's user_model, served by the stand-in
    assert step["episode/proxy_user_requests/mean"] > 0 and step["episode/proxy_user_fallbacks/mean"] == 0
    pids = [int(p) for p in (fake_dir / "pids").read_text().split()]
    assert len(pids) == 1 and not process_alive(pids[0])  # stopped at the end of the run
    log = (tmp_path / "run" / "main_ppo.log").read_text()
    assert re.search(r"arew_user_service: 1 replica\(s\) of Qwen/Qwen2.5-14B-Instruct healthy at http://[\d.]+:\d+/v1", log)
    assert "arew_user_service: user server stopped (1 replica(s))" in log


def test_cancelled_job_stops_its_user_server(cluster, tmp_path, mediq_source, process_alive):
    """``ray job stop`` while the job's user server is up: the job ends STOPPED, the stand-in server's
    process is gone and the service's placement group is removed (no training step is needed)."""
    from ray.util.state import list_placement_groups

    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    job_id = "arew-test-cancel"
    submit = subprocess.Popen(
        ["bash", str(SUBMIT), "--smoke", "--task", "mediq", "--steps", "1", "--source", str(mediq_source),
         "--out", str(tmp_path / "run"), "--quiet", "data.max_prompt_length=4096"],
        env={**cluster, "AREW_JOB_ID": job_id, "AREW_USER_SERVER_CMD": f"FAKE_USER_DIR={fake_dir} exec {sys.executable} {FAKE}"},
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        log, up, deadline = tmp_path / "run" / "main_ppo.log", None, time.monotonic() + JOB_TIMEOUT
        while up is None and submit.poll() is None and time.monotonic() < deadline:  # a bound against hangs only
            text = log.read_text() if log.exists() else ""
            up = re.search(r"arew_user_service: 1 replica\(s\) of \S+ healthy at (http://[\d.]+:\d+)/v1", text)
            time.sleep(0.5)
        assert up, f"the user server never came up; submit exited {submit.poll()}"
        [pid] = [int(p) for p in (fake_dir / "pids").read_text().split()]
        assert process_alive(pid) and healthy(up.group(1) + "/health")
        [group] = [g for g, state in _user_groups(cluster, list_placement_groups).items() if state == "CREATED"]
        stop = subprocess.run([str(BIN / "ray"), "job", "stop", "--address", cluster["RAY_ADDRESS"], job_id],
                              env=cluster, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert stop.returncode == 0, stop.stdout + stop.stderr
        _, stderr = submit.communicate(timeout=120)
    finally:
        if submit.poll() is None:
            submit.kill()
    assert submit.returncode == 1 and f"job {job_id} STOPPED" in stderr
    wait_until(lambda: not process_alive(pid), "the server to die with its actor")
    wait_until(lambda: _user_groups(cluster, list_placement_groups).get(group, "REMOVED") == "REMOVED", "its placement group to be removed (its GPU free again)")


def _user_groups(cluster: dict, list_placement_groups) -> dict[str, str]:
    """The user service's placement groups on the cluster: id -> state."""
    groups = list_placement_groups(address=cluster["RAY_ADDRESS"], detail=True)
    return {g.placement_group_id: g.state for g in groups if g.name.startswith("arew_user_service")}
