"""verl's real ``main_ppo`` on the CPU backend (``arew smoke``) with GRPO on PE: rollout, reward, AReW advantages,
actor update, weight sync, validation, checkpoint and resume, rollout rows, W&B tables and the offline report, each
checked in what the run wrote (verl's file logger, the advantage dumps, the checkpoints).

One two-step run (the module's ``grpo`` fixture) that most checks read, and three one-step runs from its model that
are compared with it (no critiques, MI critiques, resumed from its checkpoint); about a minute each. The other
estimators are tests/e2e/test_algorithms.py's runs, the other tasks tests/e2e/test_tasks.py's.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from arew.core import collect_segments, parse_config, reweight_advantages
from arew.metrics.rollouts import sample_indices
from arew.reporting import panels
from arew.verl_plugin import smoke
from smoke_runs import DETERMINISTIC, advantage_dump, by_episode, rollout_rows, run_smoke

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e")


ROLLOUTS_PER_STEP = 6  # of the step's 8 episodes: a sample, not all of them
GRPO_GROUP = "e2e-grpo-as_bt"  # the W&B run group the grpo run records for arew report


@pytest.fixture(scope="module")
def grpo(runs_dir):
    """GRPO as+bt: validation first, a large learning rate (so a missed sync would show), checkpoints every step,
    W&B offline in the run folder (for the rollout tables)."""
    (runs_dir / "grpo" / "wandb").mkdir(parents=True)
    return run_smoke(
        runs_dir / "grpo",
        *DETERMINISTIC,
        "actor_rollout_ref.actor.optim.lr=0.05",
        "trainer.val_before_train=true",
        "trainer.save_freq=1",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"algorithm.arew.dump_dir={runs_dir / 'grpo' / 'dumps'}",
        "trainer.logger=[console,file,wandb]",
        f"arew_rollouts.per_step={ROLLOUTS_PER_STEP}",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(runs_dir / "grpo" / "wandb"), "WANDB_SILENT": "true",
             "WANDB_RUN_GROUP": GRPO_GROUP},  # fmt: skip
    )


@pytest.fixture(scope="module")
def vanilla(grpo, runs_dir):
    """The grpo run's first step without critiques: same seed and model, so the same rollouts with verl's own advantages."""
    return run_smoke(
        runs_dir / "vanilla",
        *DETERMINISTIC,
        f"algorithm.arew.dump_dir={runs_dir / 'vanilla' / 'dumps'}",
        variant="vanilla",
        steps=1,
        model=grpo.folder / "model",
    )


def test_grpo_steps_log_arew_and_episode_metrics(grpo):
    assert [s["step"] for s in grpo.steps] == [1, 2]
    for step in grpo.steps:
        for key in ("arew/as/pos", "arew/bt/neg", "arew/both_signs_frac", "arew/abs_coef_per_token",
                    "episode/decisions/mean", "episode/proxy_i_as_nats/mean", "episode/response_tokens/mean"):  # fmt: skip
            assert key in step, key
        assert step["arew/both_signs_frac"] > 0 and step["actor/grad_norm"] > 0
        assert step["arew/records_dropped"] == 0 and step["arew/samples_without_records"] == 0
        # SynAct's monitor is on by default: the n=2 rollouts of each of the 4 prompts share their first state
        assert step["arew/synact/as/decision_points"] >= 4 and step["arew/synact/keys_dropped"] == 0
        assert 0 <= step["arew/synact/as/outcome_constant_share"] <= 1 and step["arew/synact/as/mi"] >= 0
        assert 0 <= step["arew/synact/as/turn1/outcome_constant_share"] <= 1
        assert "arew/synact/as/critique_pos" not in step  # MI critiques are off by default
        # the crash this backend found: weight versions reach verl's _compute_metrics as ints
        assert step["training/off_policy/trajectory_staleness/max"] == 0
        for ch in ("as", "bt"):  # critique accuracy: only decisions with a critique and a non-zero base advantage count
            decisions = step[f"arew/{ch}/accuracy_decisions"]
            assert 0 <= decisions <= step[f"arew/{ch}/pos"] + step[f"arew/{ch}/neg"]
            assert step[f"arew/{ch}/near_chance_steps"] >= 0 and step[f"arew/{ch}/below_chance_steps"] >= 0
            if step["critic/score/max"] == step["critic/score/min"]:  # one reward for all: GRPO's advantages are 0
                assert decisions == 0
            assert (step[f"arew/{ch}/accuracy"] is None) == (decisions == 0)  # NaN (null in the file): nothing scored
            if decisions > 0:
                assert 0 <= step[f"arew/{ch}/accuracy"] <= 1 and 0 <= step[f"arew/{ch}/accuracy_ema"] <= 1
            assert f"arew/{ch}/adaptive_factor" not in step  # adaptive is off by default


def test_validation_logs_per_data_source(grpo):
    assert grpo.validation["step"] == 0
    assert "val-core/arew/pe-g-s2/reward/mean@1" in grpo.validation
    assert any(key.startswith("val-aux/arew/pe-g-s2/proxy_i_as_nats") for key in grpo.validation)


def test_rollout_follows_the_actor_weights(grpo):
    """After a large update the rollout's log-probs still match the actor's: the weights were synced."""
    step2 = grpo.steps[1]
    assert step2["training/rollout_actor_probs_pearson_corr"] > 0.99
    assert step2["rollout_corr/log_ppl_abs_diff"] < 0.05


def test_actor_weights_change(grpo):
    before = load_file(grpo.folder / "model" / "model.safetensors")
    after = load_file(grpo.folder / "checkpoints" / "global_step_2" / "actor" / "huggingface" / "model.safetensors")
    assert before.keys() == after.keys()
    changed = [name for name in before if not torch.equal(before[name].float(), after[name].float())]
    assert len(changed) > len(before) // 2


def test_advantages_differ_from_vanilla_exactly_where_the_records_say(grpo, vanilla):
    """Same seed, same rollouts: AReW's step-1 advantages are verl's plus the critique coefficients."""
    ours = advantage_dump(grpo, 1)
    theirs = by_episode(advantage_dump(vanilla, 1), ours["episodes"])
    assert ours["records"] == theirs["records"]  # same seed: the same episodes, turn for turn
    lengths = torch.tensor([len(m) for m in ours["response_mask"]])
    width = int(lengths.max())
    pad = lambda rows: torch.stack([torch.nn.functional.pad(r.float(), (0, width - len(r))) for r in rows])  # noqa: E731
    mask, base, reweighted = pad(ours["response_mask"]), pad(theirs["advantages"]), pad(ours["advantages"])
    config = parse_config({"channels": "as+bt", "weighting": "minority_fixed", "lam": 0.2, "noise": {"neg_to_pos_prob": 0.5, "seed": 3}})
    segments = collect_segments(ours["records"], lengths, noise_keys=ours["episodes"])
    expected, _ = reweight_advantages(base, mask, segments, config, step=1)
    assert torch.allclose(reweighted, expected, atol=1e-6)
    changed = (reweighted - base).abs() > 1e-9
    assert changed.any()
    inside = torch.zeros_like(changed)
    for row, record in enumerate(ours["records"]):
        for start, end in zip(record["start"], record["end"]):
            inside[row, start:end] = True
    assert not (changed & ~inside).any()  # nothing moves outside a recorded decision


def test_synact_fill_changes_the_advantages_only_where_it_placed_critiques(grpo, runs_dir):
    """The grpo run's step 1 again (same model and seed: the same episodes) with the MI critiques filling the rule's zeros.

    What this run can show: the keys travel from the agent loop to the estimator, the monitor and the
    critique counts are logged, and the advantages change exactly where MI critiques went. What it cannot:
    the tiny random model never writes a valid answer, so every reward is 0, every decision point is
    outcome-constant and fill places nothing (tests/verl/test_trainer_stage.py checks separating points
    through the same stage, tests/core/test_synact.py the numbers).
    """
    folder = runs_dir / "synact"
    result = run_smoke(
        folder, *DETERMINISTIC, "algorithm.arew.synact.critiques=fill", f"algorithm.arew.dump_dir={folder / 'dumps'}",
        steps=1, model=grpo.folder / "model",
    )  # fmt: skip
    step = result.steps[0]
    assert panels.missing_keys(step, needs=("synact_critiques",)) == []  # the dashboard's MI-critique panel
    placed = sum(step[f"arew/synact/{ch}/critique_{sign}"] for ch in ("as", "bt") for sign in ("pos", "neg"))
    assert step["arew/synact/as/decision_points"] >= 4
    ours = advantage_dump(result, 1)
    theirs = by_episode(advantage_dump(grpo, 1), ours["episodes"])
    assert ours["records"] == theirs["records"]  # the same episodes, turn for turn
    keys = ours["decision_keys"]
    assert all(len(k["state"]) == len(r["start"]) for k, r in zip(keys, ours["records"]))
    changed_rows = [not torch.equal(a, b) for a, b in zip(ours["advantages"], theirs["advantages"])]
    if step["critic/score/max"] == step["critic/score/min"]:  # the random model: no outcome varies in any group
        assert placed == 0 and step["arew/synact/as/outcome_constant_share"] == 1.0
        assert not any(changed_rows)  # fill placed nothing, so nothing moved
    else:  # outcomes varied: where MI critiques went the advantages moved, and only inside decisions
        assert placed == 0 or any(changed_rows)
        for advantage, other, record in zip(ours["advantages"], theirs["advantages"], ours["records"]):
            inside = torch.zeros(len(advantage), dtype=torch.bool)
            for start, end in zip(record["start"], record["end"]):
                inside[start:end] = True
            assert torch.equal(advantage[~inside], other[~inside])


def test_resume_continues_with_the_same_schedule_and_noise(grpo, runs_dir):
    folder = runs_dir / "resumed"
    (folder / "checkpoints").mkdir(parents=True)
    shutil.copytree(grpo.folder / "checkpoints" / "global_step_1", folder / "checkpoints" / "global_step_1")
    (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    resumed = run_smoke(
        folder,
        *DETERMINISTIC,
        "actor_rollout_ref.actor.optim.lr=0.05",
        "trainer.resume_mode=auto",
        f"algorithm.arew.dump_dir={folder / 'dumps'}",
        model=grpo.folder / "model",
    )
    assert [s["step"] for s in resumed.steps] == [2]
    assert not (folder / "dumps" / "advantages_step1.pt").exists()
    ours = advantage_dump(resumed, 2)
    theirs = by_episode(advantage_dump(grpo, 2), ours["episodes"])
    assert ours["records"] == theirs["records"]
    for a, b in zip(ours["advantages"], theirs["advantages"]):
        assert torch.allclose(a, b, atol=1e-6)
    for key in ("arew/as/pos", "arew/as/neg", "arew/bt/pos", "arew/bt/neg", "arew/strength_factor", "arew/abs_coef_per_token"):
        assert resumed.steps[0][key] == pytest.approx(grpo.steps[1][key]), key


def test_smoke_summary_reports_each_step(grpo):
    text = smoke.summary(grpo)
    assert text.startswith("arew smoke: 2 training steps")
    for needle in ("step 1:", "step 2:", "generation", "weight sync", "critiques as{+", "actor/grad_norm", str(grpo.metrics_path)):
        assert needle in text, needle


def test_dashboard_panels_are_logged_by_a_real_run(grpo):
    """Every key the dashboard plots for this kind of run (PE, GRPO, with validation) is in its metrics file:
    a renamed or dropped metric breaks this test, not an empty chart. Choice-task, lab, adaptive, MI-critique
    and ablation panels are out of scope: this run does none of those."""
    logged = {key for line in grpo.metrics_path.read_text().splitlines() for key in json.loads(line)["data"]}
    missing = panels.missing_keys(logged, needs=("always", "pe", "grpo", "validation"))
    assert missing == [], f"dashboard panel keys this run never logged: {missing}"


ROW_KEYS = {"split", "step", "episode", "task", "data_source", "reward", "failed", "prompt", "numbers", "turns"}
TURN_KEYS = {"index", "turn", "channel", "agent", "feedback", "critique", "applied", "coefficient", "sources", "reason"}


def _check_schema(row: dict, split: str) -> None:
    assert set(row) == ROW_KEYS and row["split"] == split and row["task"] == "pe-g-s2"
    assert row["data_source"] == "arew/pe-g-s2" and row["failed"] is None and 0 < len(row["prompt"]) <= 4000
    assert isinstance(row["reward"], float) and all(isinstance(v, float) for v in row["numbers"].values())
    assert row["numbers"]["decisions"] == len(row["turns"]) > 0 and "proxy_as_mean" in row["numbers"]
    for i, turn in enumerate(row["turns"]):
        assert set(turn) == TURN_KEYS and turn["index"] == i and turn["channel"] in ("as", "bt") and turn["turn"] >= 1
        assert isinstance(turn["agent"], str) and turn["critique"] in (-1, 0, 1)
        assert turn["sources"] is None and turn["reason"] is None  # no critique source in this run
    assert row["turns"][0]["turn"] == 1 and row["turns"][-1]["feedback"] is None  # the final answer gets no reply


def test_train_rollouts_carry_each_decisions_coefficient(grpo, vanilla):
    """Rows of the sampled episodes, each decision with the value AReW added to its tokens: the grpo dump's
    advantages minus the vanilla run's (same rollouts) on that decision's model tokens."""
    rows = rollout_rows(grpo, "train")
    assert [row["step"] for row in rows] == [1] * ROLLOUTS_PER_STEP + [2] * ROLLOUTS_PER_STEP
    ours = advantage_dump(grpo, 1)
    theirs = by_episode(advantage_dump(vanilla, 1), ours["episodes"])
    first = [row for row in rows if row["step"] == 1]
    assert [row["episode"] for row in first] == [ours["episodes"][i] for i in sample_indices(ours["episodes"], 1, ROLLOUTS_PER_STEP)]
    nonzero = 0
    for row in rows:
        _check_schema(row, "train")
    for row in first:
        i = ours["episodes"].index(row["episode"])
        record, mask = ours["records"][i], ours["response_mask"][i].bool()
        added = ours["advantages"][i] - theirs["advantages"][i]
        assert [t["channel"] for t in row["turns"]] == record["channel"] and [t["critique"] for t in row["turns"]] == record["label"]
        for turn, start, end in zip(row["turns"], record["start"], record["end"]):
            model = mask[start:end]
            expected = torch.full((int(model.sum()),), turn["coefficient"])
            torch.testing.assert_close(added[start:end][model], expected, atol=1e-6, rtol=0)
            assert turn["applied"] in (-1, 0, 1) and (turn["coefficient"] == 0 or (turn["coefficient"] > 0) == (turn["applied"] > 0))
            nonzero += turn["coefficient"] != 0
    assert nonzero > 0


def test_validation_rollouts_and_selflock_metrics(grpo):
    rows = rollout_rows(grpo, "val")
    assert len(rows) == 4 and {row["step"] for row in rows} == {0}  # data.val_max_samples=4, one rollout each
    for row in rows:
        _check_schema(row, "val")
        assert all(t["applied"] is None and t["coefficient"] is None for t in row["turns"])
    assert sum(row["reward"] for row in rows) / 4 == pytest.approx(grpo.validation["val-core/arew/pe-g-s2/reward/mean@1"])
    for step in grpo.steps:
        for key in ("selflock/corr_as_reward", "selflock/corr_as_oracle", "selflock/corr_gap"):
            assert key in step and (step[key] is None or -2 <= step[key] <= 2), key  # null: undefined (NaN)
        gap = step["episode/proxy_oracle_reward/mean"] - step["critic/score/mean"]
        assert step["selflock/oracle_reward_gap"] == pytest.approx(gap)
        assert 0 <= step["timing_s/arew_rollouts"] < step["timing_s/step"]


def test_wandb_offline_run_holds_the_rollout_tables(grpo):
    runs = list((grpo.folder / "wandb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    tables = runs[0] / "files" / "media" / "table" / "rollouts"
    train, val = sorted(tables.glob("train_*.table.json")), sorted(tables.glob("val_*.table.json"))
    assert len(train) == 2 and len(val) == 1
    content = json.loads(train[0].read_text())
    assert "transcript" in content["columns"] and "critiques" in content["columns"]
    assert len(content["data"]) == ROLLOUTS_PER_STEP


def test_the_offline_report_reads_the_runs_metrics_and_rollouts(grpo, tmp_path):
    """``arew report`` on a real run folder: every sampled episode (train and validation) and the logged
    panels arrive, and nothing in the trainer's files is reported as broken input."""
    from arew.reporting import report

    (run,) = report.load_runs([grpo.folder])
    assert run.problems == {}
    splits = sorted(episode["split"] for episode in run.episodes)
    assert splits == ["train"] * (2 * ROLLOUTS_PER_STEP) + ["val"] * 4
    drawn = {p["title"] for s in report.chart_data([run]) for p in s["panels"]}
    assert {"Training reward", "Validation reward", "AS proxy", "I_AS (nats)", "Both-signs share"} <= drawn
    assert run.recorded_group == GRPO_GROUP  # rollouts/run.json: W&B's run group
    page = report.build([grpo.folder], tmp_path / "report.html", pngs=False)
    assert page.stat().st_size > 0


@pytest.mark.browser
def test_the_trainer_runs_report_in_a_browser_draws_its_group_and_reads_an_episode(grpo, tmp_path):
    """The page of a real trainer run in Chromium: the run drawn as its W&B group in one colour on every chart and
    in the viewer, and a reweighted episode read decision by decision (timeline cells = turns, λu bars drawn)."""
    from report_checks import PAGE_LIMIT_BYTES, artifact, assert_one_colour_per_group, open_report

    from arew.reporting import report
    from arew.reporting.screenshot import browser

    out = report.build([grpo.folder], tmp_path / "report.html", pngs=False)
    assert out.stat().st_size < PAGE_LIMIT_BYTES
    with browser() as context:
        page, problems = open_report(context, out)
        assert page.locator(".group-toggle").all_inner_texts() == [f"{GRPO_GROUP} (1)"]
        assert page.locator("svg.chart").count() == page.locator("path.mean").count() > 10  # one line per chart
        assert_one_colour_per_group(page, [GRPO_GROUP])
        assert page.locator("tr.episode").count() == 2 * ROLLOUTS_PER_STEP + 4
        page.select_option("#f-split", "train")
        page.select_option("#f-source", "applied")
        page.select_option("#f-pattern", "both:")
        rows = page.locator("tr.episode")
        assert rows.count() > 0
        rows.first.click()
        turns = page.locator("#episode-detail .turn")
        assert page.locator("#episode-detail svg.timeline rect.cell").count() == turns.count() > 0
        assert page.locator("#episode-detail svg.timeline rect.coefficient-bar").count() > 0
        page.evaluate("window.scrollTo(0, 0)")  # the sticky controls at the top of the picture
        page.screenshot(path=str(artifact("report-trainer-run.png")), full_page=True)
    assert problems == []
