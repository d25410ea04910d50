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
    from arew.tiny_models import build_chat_tokenizer, build_scripted_model

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
