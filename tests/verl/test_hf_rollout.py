"""The hf rollout server on its own: sampling parameters, log-probs from the current weights, weight loads,
and partial rollouts (abort, park, reject, resume)."""

from __future__ import annotations

import pytest
import torch

from arew.verl_plugin.cpu.hf_rollout import HFRolloutServer


@pytest.fixture()
def server(tiny_model_dir):
    return HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1)


def _prompt(server):
    messages = [{"role": "user", "content": "compare items with a trade-off"}]
    return server.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)


def _log_probs(model, prompt, tokens, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1)


async def test_sampled_tokens_carry_their_log_probs_at_the_temperature(server):
    prompt = _prompt(server)
    out = await server.generate(prompt, {"temperature": 0.7, "top_p": 1.0, "top_k": -1, "max_tokens": 12, "logprobs": True}, "r1")
    assert 1 <= len(out.token_ids) <= 12 and len(out.log_probs) == len(out.token_ids)
    expected = _log_probs(server.model, prompt, out.token_ids, 0.7)
    assert torch.allclose(torch.tensor(out.log_probs), expected, atol=1e-4)
    assert out.extra_fields["global_steps"] is None and out.stop_reason == "completed"
    again = await server.generate(prompt, {"temperature": 0.7, "max_tokens": 12, "logprobs": True}, "r1")
    assert again.token_ids == out.token_ids  # seeded by (seed, request id, prompt length)


async def test_greedy_max_tokens_and_no_log_probs_unless_asked(server):
    prompt = _prompt(server)
    out = await server.generate(prompt, {"temperature": 0, "max_tokens": 5}, "a")
    other = await server.generate(prompt, {"temperature": 0, "max_tokens": 5}, "b")
    assert out.token_ids == other.token_ids and len(out.token_ids) <= 5 and out.log_probs is None
    with torch.no_grad():
        first = server.model(torch.tensor([prompt])).logits[0, -1].argmax()
    assert out.token_ids[0] == int(first)


async def test_stop_strings_end_the_turn(server):
    prompt = _prompt(server)
    free = await server.generate(prompt, {"temperature": 0, "max_tokens": 40}, "x")
    text = server.tokenizer.decode(free.token_ids)
    assert len(text) > 4
    stop = text[2:4]  # a string the greedy continuation is known to produce
    out = await server.generate(prompt, {"temperature": 0, "max_tokens": 40, "stop": [stop]}, "x")
    assert stop in server.tokenizer.decode(out.token_ids) and len(out.token_ids) < len(free.token_ids)


async def test_weight_loads_change_the_policy_and_check_names(server):
    prompt = _prompt(server)
    before = await server.generate(prompt, {"temperature": 1.0, "max_tokens": 8, "logprobs": True}, "w")
    state = {name: torch.randn_like(p) for name, p in server.model.state_dict().items()}
    await server.update_weights(state, global_steps=3)
    after = await server.generate(prompt, {"temperature": 1.0, "max_tokens": 8, "logprobs": True}, "w")
    assert after.extra_fields["global_steps"] == 3
    expected = _log_probs(server.model, prompt, after.token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.log_probs), expected, atol=1e-4)
    assert after.token_ids != before.token_ids or after.log_probs != before.log_probs
    with pytest.raises(KeyError, match="does not have"):
        await server.update_weights({**state, "extra.weight": torch.zeros(1)})
    partial = dict(state)
    partial.pop(next(iter(partial)))
    with pytest.raises(KeyError, match="did not include"):
        await server.update_weights(partial)


async def test_prompt_without_room_is_refused(server):
    with pytest.raises(ValueError, match="max_model_len=4096"):
        await server.generate([1] * 4096, {"max_tokens": 4}, "long")


async def test_a_scripted_model_answers_every_turn_with_its_reply_through_the_server(tmp_path):
    from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model

    reply = "<interact>Do you have a fever?</interact>"
    tokenizer = build_chat_tokenizer(extra_text=[reply] * 50)
    build_scripted_model(tokenizer, reply).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    server = HFRolloutServer(str(tmp_path), str(tmp_path), False, max_model_len=4096, response_length=64, seed=1)
    for i, content in enumerate(["Turn 1 of 8: ask the patient one question.", "Now state your updated scores."]):
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=True, return_dict=False)
        out = await server.generate(prompt, {"temperature": 1.0, "max_tokens": 40, "stop": ["</interact>"]}, f"s{i}")
        assert tokenizer.decode(out.token_ids) == reply
    with pytest.raises(ValueError, match="two successors"):
        build_scripted_model(tokenizer, "Do you? Do you have?")


def _prompts(server, n):
    texts = ["compare items", "compare items with a trade-off and a budget", "a trade-off", "items with a budget of two"]
    return [
        server.tokenizer.apply_chat_template([{"role": "user", "content": texts[i % len(texts)]}], add_generation_prompt=True, tokenize=True, return_dict=False)
        for i in range(n)
    ]


async def test_waiting_requests_are_generated_together_each_row_on_its_own_prompt(tiny_model_dir):
    import asyncio

    server = HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=8)
    prompts = _prompts(server, 6)
    assert len({len(p) for p in prompts}) > 1  # rows of different lengths share one left-padded batch
    budgets = [3, 12, 7, 12, 1, 9]
    outs = await asyncio.gather(*[
        server.generate(p, {"temperature": 0.8, "max_tokens": b, "logprobs": True}, f"b{i}") for i, (p, b) in enumerate(zip(prompts, budgets))
    ])  # fmt: skip
    stats = await server.stats()
    assert stats["requests"] == 6 and stats["largest_batch"] > 1 and stats["batches"] < 6
    for prompt, budget, out in zip(prompts, budgets, outs):
        assert 1 <= len(out.token_ids) <= budget and len(out.log_probs) == len(out.token_ids)
        # the padding and the other rows change nothing: log-probs are the model's on this prompt alone
        assert torch.allclose(torch.tensor(out.log_probs), _log_probs(server.model, prompt, out.token_ids, 0.8), atol=1e-4)


async def test_a_batch_cuts_each_row_at_its_own_stop_and_keeps_settings_apart(tiny_model_dir):
    import asyncio

    server = HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=8)
    prompts = _prompts(server, 4)
    free = await asyncio.gather(*[server.generate(p, {"temperature": 0, "max_tokens": 30}, f"f{i}") for i, p in enumerate(prompts)])
    texts = [server.tokenizer.decode(out.token_ids) for out in free]
    stop = texts[1][3:5]  # produced by one greedy row, perhaps not by the others
    stopped = await asyncio.gather(*[server.generate(p, {"temperature": 0, "max_tokens": 30, "stop": [stop]}, f"s{i}") for i, p in enumerate(prompts)])
    for text, full, out in zip(texts, free, stopped):
        if stop in text:
            cut = server.tokenizer.decode(out.token_ids)
            assert cut.endswith(stop) or stop in cut[-len(stop) - 8 :]
            assert len(out.token_ids) < len(full.token_ids) and full.token_ids[: len(out.token_ids)] == out.token_ids
        else:
            assert out.token_ids == full.token_ids  # greedy rows are the same whatever shares their batch
    mixed = await asyncio.gather(
        server.generate(prompts[0], {"temperature": 0, "max_tokens": 4}, "g"),
        server.generate(prompts[0], {"temperature": 1.0, "max_tokens": 4, "logprobs": True}, "t"),
    )
    assert mixed[0].token_ids == free[0].token_ids[:4]  # greedy, not sampled with the other request's temperature


async def test_one_request_at_a_time_under_full_determinism_and_bad_prompts_fail_alone(tiny_model_dir):
    import asyncio

    server = HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=1)
    prompts = _prompts(server, 3)
    results = await asyncio.gather(
        *[server.generate(p, {"temperature": 1.0, "max_tokens": 6}, f"d{i}") for i, p in enumerate(prompts)],
        server.generate([1] * 4096, {"max_tokens": 4}, "long"),
        return_exceptions=True,
    )
    assert isinstance(results[-1], ValueError) and all(len(r.token_ids) >= 1 for r in results[:-1])
    assert (await server.stats())["largest_batch"] == 1
    alone = await server.generate(prompts[1], {"temperature": 1.0, "max_tokens": 6}, "d1")
    assert alone.token_ids == results[1].token_ids  # seeded per request: the same reply whatever ran around it
    with pytest.raises(ValueError, match="max_num_seqs"):
        HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=0)


def test_the_server_follows_its_callers_event_loop(tiny_model_dir):
    import asyncio

    server = HFRolloutServer(str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=4)
    prompt = _prompts(server, 1)[0]
    for _ in range(2):  # a fresh loop each time, as two asyncio.run calls give
        assert asyncio.run(server.generate(prompt, {"temperature": 0, "max_tokens": 3}, "l")).token_ids


async def test_a_batch_holds_at_most_max_batch_tokens_of_padded_prompt(tiny_model_dir):
    import asyncio

    server = HFRolloutServer(
        str(tiny_model_dir), str(tiny_model_dir), False, max_model_len=4096, response_length=64, seed=1, max_batch=8, max_batch_tokens=50
    )
    short = _prompts(server, 1)[0]
    assert 50 / 3 < len(short) <= 50 / 2  # two fit in 50 padded tokens, three do not
    long = short * 3  # alone over the budget: still served, on its own
    outs = await asyncio.gather(*[server.generate(p, {"temperature": 1.0, "max_tokens": 2}, f"t{i}") for i, p in enumerate([short] * 4 + [long])])
    stats = await server.stats()
    assert all(out.token_ids for out in outs) and stats["largest_batch"] == 2 and stats["batches"] >= 3


# partial rollouts: a scripted model that never ends (its reply loops) generates as long as its budget lets it, and
# _hold_at keeps its first generate call at a known token until an abort interrupts it; every wait below is for a
# state the server reports, with a generous bound, so nothing depends on how fast the machine is

LOOP_REPLY = "<interact>Do you have a fever?</interact>"
HF_LOGGER = "arew.verl_plugin.cpu.hf_rollout"


@pytest.fixture(scope="module")
def looping_dir(tmp_path_factory):
    from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model

    tokenizer = build_chat_tokenizer(extra_text=[LOOP_REPLY] * 50)
    ids = tokenizer(LOOP_REPLY, add_special_tokens=False).input_ids
    assert ids[-1] in ids[:-1]  # the last token recurs: the model repeats the reply instead of ending
    folder = tmp_path_factory.mktemp("looping")
    build_scripted_model(tokenizer, LOOP_REPLY).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _looping_server(folder, max_batch=4):
    return HFRolloutServer(str(folder), str(folder), False, max_model_len=8192, response_length=64, seed=1, max_batch=max_batch)


def _hold_at(server, tokens):
    """The server's next generate call stops before its (tokens + 1)-th token (forward pass) until an abort's interrupt
    is set: the abort then always finds it at ``tokens`` tokens and cuts it at ``tokens + 1``, however fast the machine."""
    import functools

    forward, calls = server.model.forward, [0]

    @functools.wraps(forward)  # generate reads the forward's signature
    def held(*args, **kwargs):
        calls[0] += 1
        if calls[0] == tokens + 1:
            assert server._interrupt.wait(180), "no abort came"
        return forward(*args, **kwargs)

    server.model.forward = held


def _script(tokenizer, n):
    """The looping model's first n tokens: the reply, then its tail after the first occurrence of its last token, again and again."""
    ids = tokenizer(LOOP_REPLY, add_special_tokens=False).input_ids
    successor = {}
    for token, following in zip(ids, ids[1:]):
        successor.setdefault(token, following)
    tokens = [ids[0]]
    while len(tokens) < n:
        tokens.append(successor[tokens[-1]])
    return tokens


async def _until(server, condition, what, bound=180.0):
    import asyncio
    import time

    deadline = time.monotonic() + bound
    while not condition(stats := await server.stats()):
        assert time.monotonic() < deadline, f"the server never reported {what}: {stats}"
        await asyncio.sleep(0.01)
    return stats


def _long(n, **extra):
    return {"temperature": 1.0, "max_tokens": n, "logprobs": True, **extra}


async def test_an_abort_cuts_the_generation_in_progress_and_returns_its_tokens_so_far(looping_dir, caplog):
    import asyncio
    import logging

    server = _looping_server(looping_dir)
    prompt = _prompt(server)
    _hold_at(server, 5)
    task = asyncio.create_task(server.generate(prompt, _long(1000), "long"))
    await _until(server, lambda s: s["generating"] == 1 and s["generating_tokens"] == 5, "5 tokens generated")
    with caplog.at_level(logging.INFO, logger=HF_LOGGER):
        result = await server.abort_all_requests()
    assert result == {"aborted_count": 1, "request_ids": ["long"]}
    stats = await server.stats()
    assert stats["generating"] == 0 and stats["paused"]  # the generate call has stopped when the abort returns
    out = await asyncio.wait_for(task, 60)
    assert out.stop_reason == "aborted" and out.token_ids == _script(server.tokenizer, 6) and len(out.log_probs) == 6
    assert torch.allclose(torch.tensor(out.log_probs), _log_probs(server.model, prompt, out.token_ids, 1.0), atol=1e-4)
    assert stats["aborted_requests"] == 1 and stats["aborted_tokens"] == 6
    lines = [r.getMessage() for r in caplog.records if r.name == HF_LOGGER and r.levelno == logging.INFO]
    assert lines == ["hf rollout: aborted 1 requests mid-generation (6 tokens kept for their resumption)"]
    # a weight load right after runs at once (the lock is free), and a second abort finds nothing
    await asyncio.wait_for(server.update_weights(dict(server.model.state_dict()), global_steps=2), 60)
    assert await server.abort_all_requests() == {"aborted_count": 0, "request_ids": []}


class _Call:
    """A Ray method's ``.remote`` for a stand-in actor."""

    def __init__(self, function):
        self.remote = function


async def test_verls_partial_rollout_client_resumes_an_aborted_turn_to_its_full_budget(looping_dir):
    """verl's FullyAsyncLLMServerClient (as colocate_async uses it) over the server, its load balancer a stand-in."""
    import asyncio

    from omegaconf import OmegaConf
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient

    server = _looping_server(looping_dir)
    calls = []

    async def generate(**kwargs):
        calls.append({**kwargs, "sampling_params": dict(kwargs["sampling_params"])})  # the client rewrites its dict
        return await server.generate(**kwargs)

    async def no_fields():
        return []

    async def acquire(request_id, **fields):
        return "hf-0", handle

    handle = type("Handle", (), {"generate": _Call(generate)})()
    balancer = type("Balancer", (), {
        "require_acquire_fields": _Call(no_fields), "require_release_fields": _Call(no_fields),
        "acquire_server": _Call(acquire), "release_server": _Call(lambda **fields: None),
    })()  # fmt: skip
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "hf", "full_determinism": False, "response_length": 64}}})
    client = FullyAsyncLLMServerClient(config, balancer)
    prompt, budget = _prompt(server), 30
    await server.set_global_steps(6)
    _hold_at(server, 7)
    turn = asyncio.create_task(client.generate("turn", prompt_ids=prompt, sampling_params=_long(budget)))
    await _until(server, lambda s: s["generating"] == 1 and s["generating_tokens"] == 7, "7 tokens generated")
    assert (await server.abort_all_requests())["aborted_count"] == 1
    await server.update_weights(dict(server.model.state_dict()), global_steps=7)  # what colocate_async does meanwhile
    await server.resume_generation()
    out = await asyncio.wait_for(turn, 180)
    assert len(calls) == 2  # the aborted attempt, then its resumption
    assert calls[1]["prompt_ids"] == prompt + _script(server.tokenizer, 8) and calls[1]["sampling_params"]["max_tokens"] == budget - 8
    assert out.token_ids == _script(server.tokenizer, budget) and len(out.log_probs) == budget and out.stop_reason == "length"
    assert out.extra_fields["min_global_steps"] == 6 and out.extra_fields["max_global_steps"] == 7
    stats = await server.stats()
    assert stats["aborted_requests"] == 1 and stats["aborted_tokens"] == 8 and stats["requests"] == 2


async def test_requests_wait_while_paused_and_run_after_the_resume_under_the_new_weights(looping_dir):
    import asyncio

    server = _looping_server(looping_dir)
    prompt = _prompt(server)
    for _ in range(2):  # idle: nothing to abort, twice
        assert await server.abort_all_requests() == {"aborted_count": 0, "request_ids": []}
    task = asyncio.create_task(server.generate(prompt, _long(5), "parked"))
    await _until(server, lambda s: s["waiting"] == 1, "the request waiting")
    await asyncio.sleep(0.5)  # time in which a server that ignored the pause would start it
    stats = await server.stats()
    assert not task.done() and stats["requests"] == 0 and stats["waiting"] == 1 and stats["paused"]
    await server.update_weights(dict(server.model.state_dict()), global_steps=5)
    await server.resume_generation()
    out = await asyncio.wait_for(task, 120)
    assert out.stop_reason == "completed" and out.token_ids == _script(server.tokenizer, 5)
    assert out.extra_fields["global_steps"] == 5  # the weights it ran under, loaded while it waited
    stats = await server.stats()
    assert stats["requests"] == 1 and not stats["paused"] and stats["aborted_requests"] == 0
    again = await server.generate(prompt, _long(3), "later")  # serving goes on as usual
    assert again.stop_reason == "completed" and len(again.token_ids) == 3


async def test_reject_request_answers_the_waiting_and_new_arrivals_at_once_empty_and_aborted(looping_dir, caplog):
    import asyncio
    import logging

    server = _looping_server(looping_dir, max_batch=1)
    prompt = _prompt(server)
    _hold_at(server, 2)
    running = asyncio.create_task(server.generate(prompt, _long(1000), "running"))
    waiting = asyncio.create_task(server.generate(prompt, _long(1000), "waiting"))  # max_batch=1: behind the first
    await _until(server, lambda s: s["generating"] == 1 and s["generating_tokens"] == 2 and s["waiting"] == 1, "one running, one waiting")
    with caplog.at_level(logging.INFO, logger=HF_LOGGER):
        result = await server.abort_all_requests(reject_request=True)
    assert result == {"aborted_count": 2, "request_ids": ["running", "waiting"]}
    cut, rejected = await asyncio.wait_for(asyncio.gather(running, waiting), 60)
    assert cut.stop_reason == "aborted" and cut.token_ids == _script(server.tokenizer, 3) and len(cut.log_probs) == 3
    assert rejected.stop_reason == "aborted" and rejected.token_ids == []
    late = await asyncio.wait_for(server.generate(prompt, _long(5), "late"), 60)  # answered at once, not parked
    assert late.stop_reason == "aborted" and late.token_ids == []
    stats = await server.stats()
    assert stats["rejected_requests"] == 2 and stats["aborted_requests"] == 1 and stats["requests"] == 1 and stats["waiting"] == 0
    assert [r.getMessage() for r in caplog.records if r.name == HF_LOGGER] == [
        "hf rollout: aborted 1 requests mid-generation (3 tokens kept for their resumption)",
        "hf rollout: rejected 1 waiting requests (paused with reject_request=True)",
    ]
    await server.resume_generation()  # a later resume takes requests again, and parks rather than rejects after a plain abort
    after = await asyncio.wait_for(server.generate(prompt, _long(5), "after"), 120)
    assert after.stop_reason == "completed" and after.token_ids == _script(server.tokenizer, 5)


async def test_a_row_that_ended_on_its_own_in_an_interrupted_batch_is_completed(looping_dir):
    import asyncio

    server = _looping_server(looping_dir)
    prompt = _prompt(server)
    _hold_at(server, 6)
    short = asyncio.create_task(server.generate(prompt, _long(4), "short"))
    long = asyncio.create_task(server.generate(prompt, _long(1000), "long"))  # queued together: one batch
    await _until(server, lambda s: s["generating"] == 2 and s["generating_tokens"] == 6, "6 tokens of a batch of 2")
    assert await server.abort_all_requests() == {"aborted_count": 1, "request_ids": ["long"]}
    done, cut = await asyncio.wait_for(asyncio.gather(short, long), 60)
    assert done.stop_reason == "completed" and done.token_ids == _script(server.tokenizer, 4) and len(done.log_probs) == 4
    assert cut.stop_reason == "aborted" and cut.token_ids == _script(server.tokenizer, 7)
    assert (await server.stats())["aborted_tokens"] == 7  # the completed row is not counted


async def test_a_batch_aborted_before_its_generate_call_began_waits_for_the_resume_untouched(looping_dir):
    import asyncio

    server = _looping_server(looping_dir)
    prompt = _prompt(server)
    server._lock.acquire()  # as a weight load in progress does: the batch is taken but cannot start
    try:
        task = asyncio.create_task(server.generate(prompt, _long(5), "early"))
        await _until(server, lambda s: server._in_flight is not None and s["waiting"] == 0, "the request taken into a batch")
        abort = asyncio.create_task(server.abort_all_requests())
        await _until(server, lambda s: s["paused"], "the pause")
    finally:
        server._lock.release()
    assert await asyncio.wait_for(abort, 60) == {"aborted_count": 0, "request_ids": []}
    stats = await server.stats()
    assert stats["waiting"] == 1 and stats["requests"] == 0 and not task.done()  # back in the queue, not run
    await server.resume_generation()
    out = await asyncio.wait_for(task, 120)
    assert out.stop_reason == "completed" and out.token_ids == _script(server.tokenizer, 5)


def test_generate_rows_tells_rows_cut_by_an_interrupt_from_rows_that_ended(tiny_model, chat_tokenizer):
    from arew.engines.hf_generation import Interrupt, generate_batch, generate_rows, generation_config

    prompts = _prompts(type("S", (), {"tokenizer": chat_tokenizer})(), 3)
    config = generation_config(tiny_model, chat_tokenizer, max_new_tokens=6, temperature=0, stop=())
    interrupt = Interrupt()
    interrupt.set()  # before the call: every row stops after its first token
    tokens, _, ended = generate_rows(tiny_model, chat_tokenizer, prompts, config, 0, [1, 6, 6], interrupt)
    assert [len(t) for t in tokens] == [1, 1, 1] and interrupt.tokens == 1
    eos = chat_tokenizer.eos_token_id
    assert ended == [True, tokens[1][0] == eos, tokens[2][0] == eos]  # row 0 reached its budget; the others were cut
    free, _, ended = generate_rows(tiny_model, chat_tokenizer, prompts, config, 0, [1, 6, 6])
    assert ended == [True, True, True] and [t.tolist() for t in free] == [t.tolist() for t in generate_batch(tiny_model, chat_tokenizer, prompts, config, 0, [1, 6, 6])[0]]
    assert [t.tolist() for t in tokens] == [t[:1].tolist() for t in free]  # greedy: the cut rows are the free ones' prefixes
