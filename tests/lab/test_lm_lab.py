"""The language-model lab's parts that need no trainer: the SFT encoding, the settings' checks and hash, the runs'
overrides and the outputs written from run folders (the whole chain runs in tests/e2e/test_lm_lab.py)."""

import json
import math
from dataclasses import replace

import matplotlib.image as mpimg
import pytest

from arew.engines.tiny_models import build_chat_tokenizer
from arew.lab.export import METRIC_KEYS
from arew.lab.lm import report
from arew.lab.lm.experiment import LMLab, run_folder
from arew.lab.lm.warm_start import IGNORE, WarmStart, encode
from arew.verl_plugin.smoke import SmokeRun

CONVERSATION = [
    {"role": "system", "content": "Estimate the weights."},
    {"role": "user", "content": "Turn 1: ask."},
    {"role": "assistant", "content": "<scratch>ask</scratch><interact>3, 7 | 1, 4</interact>"},
    {"role": "user", "content": "User: Yes."},
    {"role": "assistant", "content": "<answer>0.6, 0.4</answer>"},
]


def test_sft_labels_are_the_assistant_turns_and_their_end_token_only():
    tokenizer = build_chat_tokenizer([m["content"] for m in CONVERSATION])
    ids, labels = encode(tokenizer, CONVERSATION)
    assert ids == list(tokenizer.apply_chat_template(CONVERSATION, tokenize=True, return_dict=False))
    learned = tokenizer.decode([token for token, label in zip(ids, labels) if label != IGNORE], skip_special_tokens=False)
    assert learned == "<scratch>ask</scratch><interact>3, 7 | 1, 4</interact><|im_end|><answer>0.6, 0.4</answer><|im_end|>"
    assert all(label in (IGNORE, token) for token, label in zip(ids, labels))


def test_the_warm_start_hash_covers_its_settings_and_bad_settings_name_their_key():
    assert WarmStart().key() == WarmStart().key()
    assert WarmStart().key() != replace(WarmStart(), inform=0.3).key() != replace(WarmStart(), sft_steps=10).key()
    for key, value in (("inform", 1.2), ("heads", 3), ("sft_steps", 0)):
        with pytest.raises(ValueError, match="hidden_size" if key == "heads" else key):
            replace(WarmStart(), **{key: value})
    base = WarmStart(inform=1.0, update=1.0)
    locked = replace(WarmStart(), base=base)
    assert locked.key() != WarmStart().key() != replace(locked, base=replace(base, sft_steps=10)).key()  # the base's settings count
    assert locked.name == "pe-g-s2-inform1-update1-then-inform0.2-update0.2"
    with pytest.raises(ValueError, match="hidden_size: 64 differs from its base's 128"):
        replace(locked, hidden_size=64)
    with pytest.raises(ValueError, match="warm_start"):
        LMLab(warm_start=WarmStart())  # the locked policy must be a fine-tune of a competent build


def test_runs_train_on_the_rules_critiques_with_their_own_seeds():
    lab = LMLab(seeds=(0, 1), variants=("vanilla", "as_bt"))
    assert lab.arms() == [("grpo", "vanilla", 0), ("grpo", "as_bt", 0), ("grpo", "vanilla", 1), ("grpo", "as_bt", 1)]
    overrides = lab.overrides(1)
    assert "algorithm.arew.noise.neg_to_pos_prob=0.0" in overrides  # the smoke run's noise undone
    assert "data.seed=1" in overrides and "actor_rollout_ref.rollout.seed=1" in overrides
    assert f"actor_rollout_ref.rollout.n={lab.rollouts_per_prompt}" in overrides
    assert not any(o.startswith("data.max_prompt_length") for o in overrides)
    assert f"actor_rollout_ref.rollout.temperature={lab.temperature}" in overrides
    assert "data.max_prompt_length=702" in lab.overrides(1, prompt_length=702)  # verl pads every prompt to it
    for key, value in (("variants", ("nope",)), ("rollout", "sglang"), ("response_length", 10), ("rollouts_per_prompt", 1), ("temperature", 0.0)):
        with pytest.raises(ValueError, match=key):
            LMLab(**{key: value})


def test_t_interval_over_seeds():
    mean, half = report.t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert math.isnan(report.t_interval([1.0])[1]) and math.isnan(report.t_interval([])[0])
    assert report.t_interval([1.0, math.nan, 3.0])[0] == 2.0


def fake_run(folder, reward_slope: float, steps: int = 12) -> SmokeRun:
    """A run folder as main_ppo's file logger writes it: reward and AS proxy rising by ``reward_slope`` a step."""
    folder.mkdir(parents=True)
    lines = []
    for step in range(1, steps + 1):
        data = {"training/global_step": step, METRIC_KEYS["reward"]: 0.1 + reward_slope * step, METRIC_KEYS["as_proxy"]: 0.2 + reward_slope * step,
                METRIC_KEYS["bt_proxy"]: 0.0, METRIC_KEYS["i_as_nats"]: 0.5, "timing_s/gen": 2.0, "timing_s/step": 3.0,
                METRIC_KEYS["corr_as_reward"]: None}  # fmt: skip  (verl logs an undefined correlation as null)
        lines.append(json.dumps({"step": step, "data": data}))
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "run.json").write_text(json.dumps({"wall_seconds": 50.0, "start_up_seconds": 14.0}))
    return SmokeRun(folder, 0)


def test_outputs_from_run_folders(tmp_path):
    runs = {
        (algo, variant, seed): fake_run(run_folder(tmp_path, algo, variant, seed), slope)
        for algo, variant, slope in (("grpo", "vanilla", 0.0), ("grpo", "as_bt", 0.01))
        for seed in (0, 1)
    }
    rows = report.summarise(runs)
    assert [row["arm"] for row in rows] == ["grpo vanilla", "grpo as_bt"]
    vanilla, arew = rows
    assert vanilla["reward_change"] == pytest.approx(0.0) and arew["reward_change"] == pytest.approx(0.07)  # last 5 - first 5 steps
    assert report.window(6) == 3 and report.window(1) == 1  # a short run's ends do not overlap
    assert arew["as_proxy_end"] == pytest.approx(0.2 + 0.01 * 10)
    assert math.isnan(arew["corr_as_reward_start"])  # not logged: n/a, not zero
    table = report.results_markdown(rows)
    assert "| grpo as_bt | 2 | 12 | 5 |" in table and "n/a" in table
    timing = report.timing_markdown(runs)
    assert "| generation | 2.00 |" in timing and "| start-up and shutdown of one run | 14.0 |" in timing
    report.plot(runs, tmp_path / "curves.png")
    assert mpimg.imread(tmp_path / "curves.png").shape[1] > 1000


def test_a_page_without_the_blocks_is_refused_before_any_work(tmp_path):
    from arew.cli import main

    page = tmp_path / "page.md"
    page.write_text("# no blocks here\n")
    with pytest.raises(SystemExit, match="lm-lab-command"):
        main(["lm-lab", "--out", str(tmp_path / "out"), "--publish", str(page)])
    assert not (tmp_path / "out").exists()


def test_a_calibration_is_read_back_only_for_the_model_it_measured(tmp_path, monkeypatch):
    """A rerun after a warm start was rebuilt (a new hash: another folder name) calibrates the new model, not the old one's figures."""
    import arew.lab.lm.calibration
    from arew.lab.lm.experiment import calibrate_warm_starts

    measured = []

    def calibrate(model, rows, out, **_):
        measured.append(model.name)
        return {"reward": {"mean": 0.5, "half_width": 0.0, "count": len(rows)}}

    monkeypatch.setattr(arew.lab.lm.calibration, "calibrate", calibrate)
    lab = LMLab(calibration_episodes=2)
    old, new = tmp_path / "models" / "locked-aaaa", tmp_path / "models" / "locked-bbbb"
    calibrate_warm_starts(lab, tmp_path, {"locked": old}, log=lambda _: None)
    calibrate_warm_starts(lab, tmp_path, {"locked": old}, log=lambda _: None)
    assert measured == ["locked-aaaa"]  # read back
    figures = calibrate_warm_starts(lab, tmp_path, {"locked": new}, log=lambda _: None)
    assert measured == ["locked-aaaa", "locked-bbbb"] and figures["locked"]["model"] == "locked-bbbb"
    calibrate_warm_starts(replace(lab, temperature=1.0), tmp_path, {"locked": new}, log=lambda _: None)
    assert measured[-1] == "locked-bbbb" and len(measured) == 3  # another temperature: measured again


@pytest.mark.lab
def test_the_token_loss_probe_names_each_kind_of_assistant_token_and_runs_a_short_sft(tmp_path):
    """The categories docs/guides/lm-lab.md reports (arew.lab.lm.token_losses), on a competent turn pair; then two SFT
    steps of the probe itself on 8 transcripts, measured on one held-out transcript after each (lab tier: about 20 s)."""
    from arew.lab.lm.token_losses import first_turns, token_categories
    from arew.lab.lm.token_losses import main as probe

    messages = [
        {"role": "user", "content": "Turn 1 of 10: ask."},
        {"role": "assistant", "content": "<scratch>Movie 1: 3, 2, 1\nMovie 2: 2, 2, 4\nSign: 1+, 2=, 3-</scratch><interact>1, 2 | 1, 3</interact>"},
        {"role": "user", "content": "User: Yes."},
        {"role": "assistant", "content": "<scratch>yes: 1 up 3 down</scratch><interact>0.6, 0.5, 0.4</interact>"},
        {"role": "user", "content": "Turn 2 of 10: ask."},
        {"role": "assistant", "content": "<scratch>Movie 2: 2, 2, 4\nMovie 3: 3, 1, 4\nSign: 1-, 2+, 3=</scratch><interact>2, 3 | 2, 1</interact>"},
        {"role": "user", "content": "User: No."},
        {"role": "assistant", "content": "<scratch>no: 1 up 2 down</scratch><interact>0.7, 0.4, 0.4</interact>"},
    ]
    tokenizer = build_chat_tokenizer([m["content"] for m in messages])
    categories = token_categories(tokenizer, messages)
    ids, labels = encode(tokenizer, messages)
    assert len(categories) == len(ids)
    text = {name: tokenizer.decode([t for t, c in zip(ids, categories) if c == name]).replace(" ", "") for name in set(categories) - {None}}
    # a token across a span's edge ("-</") counts in the span it starts in
    assert text["rows"].startswith("Movie1:3,2,1\nMovie2:2,2,4Movie2:") and text["signs"].startswith("\nSign:1+,2=,3-")
    assert text["question"].startswith("1,2|1,3")
    # the first update's answer word (no earlier answer in the context) apart from the later ones
    assert text["yesno_first"] == "yes" and text["yesno"] == "no" and text["named"].startswith(":1up3down") and text["estimate"].startswith("0.6,0.5,0.4")
    assert {c for c, label in zip(categories, labels) if label == IGNORE} <= {None}  # only the assistant's tokens are named
    assert first_turns(messages, 1) == messages[:4] and first_turns(messages, 5) == messages
    rows = probe(["--steps", "2", "--every", "1", "--episodes", "8", "--held-out", "1", "--turns", "2", "--out", str(tmp_path)])
    assert [row["step"] for row in rows] == [1, 2] and {"signs", "yesno", "yesno_first", "estimate"} <= set(rows[-1])
    assert (tmp_path / "token_losses.jsonl").read_text().count("\n") == 2
