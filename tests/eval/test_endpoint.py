"""The endpoint model against a fake OpenAI-compatible server on 127.0.0.1 (aiohttp, in the test's
event loop): the request sent, stop strings put back, usage, retries, timeouts, malformed replies,
the open circuit, and option errors."""

import asyncio
import math
import time

import pytest

from arew.chat import ClientConfig
from arew.envs.parsing import extract_tag
from arew.eval.endpoint import EndpointModel, EndpointStats
from arew.eval.model import GenerationError, GenerationParams
from fakes import completion, delay

STOP = ("</interact>", "</answer>")
PARAMS = GenerationParams(max_tokens=64, temperature=0.7, top_p=0.9, stop=STOP, seed=3)
MESSAGES = [{"role": "system", "content": "Ask or answer."}, {"role": "user", "content": "Hot laptop."}]


def endpoint(url, **settings):
    """A model with quick test settings: no backoff, a short timeout."""
    settings = {"timeout": 2.0, "max_retries": 2, "backoff": 0.0, **settings}
    return EndpointModel(ClientConfig(url=url, model="m-7b", **settings))


async def test_request_shape_key_from_env_usage_and_vllm_stop_reason(serve, monkeypatch):
    monkeypatch.setenv("AREW_TEST_KEY", "sk-test-123")
    usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    server, url = await serve(lambda n, body: completion("<interact>Is the fan spinning?", usage=usage, stop_reason="</interact>"))
    model = EndpointModel.from_options(url, "m-7b", api_key_env="AREW_TEST_KEY")
    out = await model.complete(MESSAGES, PARAMS)
    assert out.text == "<interact>Is the fan spinning?</interact>" and out.finish_reason == "stop"
    assert (out.prompt_tokens, out.completion_tokens) == (12, 5)
    body = server.bodies[0]
    assert body == {"model": "m-7b", "messages": MESSAGES, "temperature": 0.7, "top_p": 0.9, "max_tokens": 64,
                    "stop": list(STOP), "seed": 3}  # fmt: skip
    assert server.headers[0]["Authorization"] == "Bearer sk-test-123"
    assert model.name == "m-7b" and "sk-test" not in repr(model.client.config)
    assert (model.stats.requests, model.stats.completions, model.stats.retries) == (1, 1, 0)


async def test_no_seed_no_stop_and_no_key_when_the_variable_is_unset(serve, monkeypatch):
    monkeypatch.delenv("AREW_TEST_KEY", raising=False)
    server, url = await serve(lambda n, body: completion("Hello.", finish_reason="length"))
    model = EndpointModel.from_options(url, "m-7b", api_key_env="AREW_TEST_KEY")
    out = await model.complete(MESSAGES, GenerationParams(max_tokens=8))
    assert out.text == "Hello." and out.finish_reason == "length" and out.prompt_tokens is None
    assert "seed" not in server.bodies[0] and "stop" not in server.bodies[0]
    assert "Authorization" not in server.headers[0]


def test_a_cut_stop_string_fails_the_parser():
    """Why stop strings are put back: the parsers reject a block whose closing tag is missing."""
    assert not extract_tag("<interact>Is the fan spinning?", "interact").ok
    assert extract_tag("<interact>Is the fan spinning?</interact>", "interact").ok


@pytest.mark.parametrize(
    "text, choice, expected",
    [
        ("<answer>0.2, 0.8", {"stop_reason": "</answer>"}, "<answer>0.2, 0.8</answer>"),  # vLLM names the string
        ("<answer>0.2, 0.8", {"matched_stop": "</answer>"}, "<answer>0.2, 0.8</answer>"),  # SGLang
        ("<interact>q?", {"stop_reason": None}, "<interact>q?"),  # vLLM: end of sequence, kept as the engine gives it
        ("<interact>q?", {"stop_reason": 151645}, "<interact>q?"),  # a stop token id
        ("<interact>q?", {}, "<interact>q?</interact>"),  # OpenAI names nothing: the open block is closed
        ("<interact>a</interact> <answer>b", {}, "<interact>a</interact> <answer>b</answer>"),  # the last one opened
        ("I am not sure.", {}, "I am not sure."),  # no open block: nothing to restore
        ("<answer>b</answer>", {"stop_reason": "</answer>"}, "<answer>b</answer>"),  # the server kept it
        ("<interact>q?", {"finish_reason": "length"}, "<interact>q?"),  # cut by max_tokens, not by a stop
    ],
)
async def test_stop_string_is_put_back(serve, text, choice, expected):
    _, url = await serve(lambda n, body: completion(text, **{"finish_reason": "stop", **choice}))
    out = await endpoint(url).complete(MESSAGES, PARAMS)
    assert out.text == expected


async def test_http_500_then_success_is_retried_and_counted(serve):
    server, url = await serve(lambda n, body: 500 if n == 0 else completion("<answer>1</answer>"))
    model = endpoint(url)
    assert (await model.complete(MESSAGES, PARAMS)).text == "<answer>1</answer>"
    assert (model.stats.http_errors, model.stats.retries, model.stats.requests, model.stats.completions) == (1, 1, 2, 1)


async def test_slow_server_times_out_each_attempt_then_raises_in_bounded_time(serve):
    server, url = await serve(lambda n, body: delay(1.0, completion("late")))
    model = endpoint(url, timeout=0.2, max_retries=2, backoff=0.05)
    cfg = model.client.config
    backoffs = sum(min(cfg.max_backoff, cfg.backoff * 2**k) for k in range(cfg.max_retries))
    bound = (cfg.max_retries + 1) * cfg.timeout + backoffs  # every attempt times out, then waits its backoff
    started = time.monotonic()
    with pytest.raises(GenerationError, match="3 attempts failed, last: timed out after 0.2 s"):
        await model.complete(MESSAGES, PARAMS)
    assert time.monotonic() - started < bound + 0.5
    assert (model.stats.timeouts, model.stats.retries, model.stats.requests, model.stats.completions) == (3, 2, 3, 0)


@pytest.mark.parametrize(
    "answer",
    [b"not json", {"choices": []}, {"error": "overloaded"}, {"choices": [{"message": {"content": None}}]}],
)
async def test_malformed_reply_raises_counted_and_not_retried(serve, answer):
    server, url = await serve(lambda n, body: answer)
    model = endpoint(url, max_retries=3)
    with pytest.raises(GenerationError, match="malformed response"):
        await model.complete(MESSAGES, PARAMS)
    assert (model.stats.parse_failures, model.stats.retries, len(server.bodies)) == (1, 0, 1)


async def test_abnormal_finish_reason_raises(serve):
    _, url = await serve(lambda n, body: completion("<interact>q", finish_reason="content_filter"))
    model = endpoint(url)
    with pytest.raises(GenerationError, match="finish_reason 'content_filter'"):
        await model.complete(MESSAGES, PARAMS)
    assert (model.stats.parse_failures, model.stats.completions) == (1, 0)


async def test_open_circuit_raises_at_once_without_a_request(serve):
    server, url = await serve(lambda n, body: 503)
    model = endpoint(url, max_retries=0, breaker_failures=2, breaker_cooldown=60)
    for _ in range(2):
        with pytest.raises(GenerationError, match="HTTP 503"):
            await model.complete(MESSAGES, PARAMS)
    with pytest.raises(GenerationError, match="circuit open after 2 consecutive failures"):
        await model.complete(MESSAGES, PARAMS)
    assert len(server.bodies) == 2 and model.stats.short_circuits == 1


async def test_concurrency_limit_holds_across_concurrent_episodes(serve):
    server, url = await serve(lambda n, body: delay(0.05, completion("<answer>1</answer>")))
    model = endpoint(url, concurrency=3)
    outs = await asyncio.gather(*(model.complete(MESSAGES, PARAMS) for _ in range(12)))
    assert len(outs) == 12 and server.max_in_flight == 3 and model.stats.completions == 12


def test_defaults_and_stats_dict():
    model = EndpointModel.from_options("http://h:8000/v1", "m")
    cfg = model.client.config
    assert (cfg.timeout, cfg.max_retries, cfg.concurrency) == (120.0, 3, 64)
    assert cfg.endpoint == "http://h:8000/v1/chat/completions"
    assert EndpointStats(requests=2).as_dict("model_")["model_requests"] == 2.0


@pytest.mark.parametrize(
    "bad, option",
    [({"timeout": 0}, "timeout"), ({"timeout": math.nan}, "timeout"), ({"timeout": "abc"}, "timeout"),
     ({"max_retries": -1}, "max_retries"), ({"max_retries": 1.5}, "max_retries"), ({"concurrency": 0}, "concurrency"),
     ({"url": "ftp://h/v1"}, "url"), ({"model": ""}, "model"), ({"api_key_env": ""}, "api_key_env")],
)  # fmt: skip
def test_bad_options_raise_naming_the_option(bad, option):
    with pytest.raises(ValueError, match=f"^{option}: "):
        EndpointModel.from_options(**{"url": "http://h:8000/v1", "model": "m", **bad})
