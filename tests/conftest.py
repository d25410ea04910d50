"""Shared fixtures: the offline tokenizer and tiny model (arew.tiny_models), and a local TransferQueue."""

from __future__ import annotations

import pytest

from arew.tiny_models import build_chat_tokenizer, build_tiny_model


@pytest.fixture(scope="session")
def chat_tokenizer():
    return build_chat_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(chat_tokenizer):
    return build_tiny_model(chat_tokenizer)


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
