"""An offline chat tokenizer, a tiny random-weight Qwen2 model and a scripted one that answers every
chat turn with a fixed reply, for tests and benchmarks.

Built from scratch on the fly (a byte-level BPE trained on a few kilobytes of task-like text,
a ChatML template); nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "<scratch>compare items with a trade-off</scratch><interact>1, 2 | 3, 4</interact>",
    "<scratch>update the weights</scratch><interact>0.5, 0.25, 0.75, 0.1, 0.9, 0.3</interact>",
    "<answer>0.4, 0.6, 0.2, 0.8, 0.5, 0.5</answer> Yes No Equal invalid because",
    "Item 0: 3, 1, 4, 1, 5, 9. Item 1: 2, 6, 5, 3, 5, 8. Attributes price quality speed size color brand.",
    "You are an agent that asks questions and updates its belief about the user's preferences.",
] * 20


def build_chat_tokenizer(extra_text: Sequence[str] = (), vocab_size: int = 600):
    """A PreTrainedTokenizerFast with ChatML special tokens and chat template.

    ``extra_text`` (e.g. a task's real prompts) joins the training corpus, for realistic token counts.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator([*CORPUS, *extra_text], trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        chat_template=CHATML,
    )


def build_tiny_model(tokenizer, seed: int = 0, *, hidden_size: int = 64, layers: int = 2, heads: int = 2, kv_heads: int = 1):
    """A small Qwen2 causal LM with random weights over ``tokenizer``'s vocabulary (by default two layers, 64 wide).

    By default two heads of 32 and one key-value head: 32 is the smallest head size vLLM's CPU attention
    supports (``vllm/v1/attention/backends/cpu_attn.py``), so the same model runs on both engines; a larger
    model keeps its head size (``hidden_size / heads``) among those sizes. The MLP is twice as wide as the model.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if hidden_size % heads or heads % kv_heads:
        raise ValueError(f"hidden_size {hidden_size} must split into {heads} heads, and the heads into {kv_heads} key-value heads")
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(config).eval()


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
