"""Shared fixtures: a byte-level BPE tokenizer with a ChatML template and a tiny random Qwen2 model,
built locally from scratch (nothing is downloaded)."""

from __future__ import annotations

import pytest

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


@pytest.fixture(scope="session")
def chat_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        chat_template=CHATML,
    )


@pytest.fixture(scope="session")
def tiny_model(chat_tokenizer):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(chat_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        eos_token_id=chat_tokenizer.eos_token_id,
        pad_token_id=chat_tokenizer.pad_token_id,
    )
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="session")
def transfer_queue():
    """A local Ray with verl's TransferQueue, as the v1 trainer and agent-loop workers use it."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"total_storage_size": 2000, "num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_model, chat_tokenizer):
    """The tiny model and tokenizer saved as a Hugging Face folder, for configs that load a model path."""
    folder = tmp_path_factory.mktemp("tiny-qwen2")
    tiny_model.save_pretrained(folder)
    chat_tokenizer.save_pretrained(folder)
    return folder
