"""The hf rollout server on its own: sampling parameters, log-probs from the current weights, weight loads."""

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
    from arew.tiny_models import build_chat_tokenizer
    from scripted_model import build_scripted_model

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
