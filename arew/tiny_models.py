"""An offline chat tokenizer and a tiny random-weight Qwen2 model, for tests and benchmarks.

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


def build_tiny_model(tokenizer, seed: int = 0):
    """A two-layer, 64-wide Qwen2 causal LM with random weights over ``tokenizer``'s vocabulary.

    Two heads of 32 and one key-value head: 32 is the smallest head size vLLM's CPU attention
    supports (``vllm/v1/attention/backends/cpu_attn.py``), so the same model runs on both engines.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(config).eval()
