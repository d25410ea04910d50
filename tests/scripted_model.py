"""A tiny Qwen2 that answers every chat turn with one fixed reply, for the tests that need an LLM to say
something parseable (a simulated user's server, the agent loop end to end). Importable as ``scripted_model``
from any test module or conftest (pyproject's ``pythonpath = ["tests"]``)."""

from __future__ import annotations

from arew.tiny_models import build_tiny_model


def build_scripted_model(tokenizer, reply: str, scale: float = 50.0):
    """A tiny Qwen2 that answers every chat turn with ``reply``, whatever the prompt.

    A random model almost never writes a parseable turn, so nothing behind the parser (a
    simulated user, its server, its circuit breaker) runs in an end-to-end test. This one is a
    bigram table: the layers' output projections are zero, so each position's logits depend on
    its own token only, and the lm head maps the generation prompt's last token to the reply's
    first, each reply token to the next, the last to end-of-sequence. A token may recur only
    with the same successor; the last may recur (e.g. the ``>`` of a closing tag), and then the
    model goes on repeating the reply, so end it with a stop string. ``scale`` sets the logit
    margin (50: sampling at temperature 1 follows the script). Train ``tokenizer`` with the
    reply in ``extra_text`` so that the reply is a few tokens.
    """
    import torch

    start = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=True)
    chain = [getattr(start, "input_ids", start)[-1], *tokenizer(reply, add_special_tokens=False).input_ids, tokenizer.eos_token_id]
    successor: dict[int, int] = {}
    for position, (token, following) in enumerate(zip(chain, chain[1:])):
        if successor.setdefault(token, following) != following and position < len(chain) - 2:
            raise ValueError(f"token {tokenizer.convert_ids_to_tokens(token)!r} of the reply has two successors: {tokenizer.convert_ids_to_tokens(chain)}")
    model = build_tiny_model(tokenizer)
    width = model.config.hidden_size
    if len(successor) > width:
        raise ValueError(f"a reply of {len(successor)} distinct tokens needs hidden_size >= {len(successor)}, have {width}")
    inputs, outputs = list(successor), list(successor.values())
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        basis = torch.linalg.qr(torch.randn(width, width))[0][: len(inputs)]  # orthonormal rows
        model.model.embed_tokens.weight[inputs] = basis
        head = torch.zeros_like(model.lm_head.weight)
        head.index_add_(0, torch.tensor(outputs), basis * scale / width**0.5)  # RMSNorm scales a unit row to norm sqrt(width)
        model.lm_head.weight.copy_(head)
    return model
