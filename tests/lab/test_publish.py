"""``python -m docgen.lab_publish``: the marked README blocks, and nothing else, come from a run."""

import json
from dataclasses import asdict, replace

import pytest

from arew.lab.config import LabConfig
from docgen.lab_publish import TARGETS, PublishError, main, publish, runs_record, summary_table

RESULTS = (
    "| variant | reward [95% CI] | reward − vanilla [95% CI] | AS proxy | BT proxy | C_BT | BT follow | I_AS (nats) "
    "| oracle reward | train reward (final) | steps to vanilla's final | steps to reward 0.5 |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    "| ppo-vanilla | 0.1 [0.1, 0.1] | - | 0.2 ± 0.0 | 0.3 ± 0.0 | 0.4 ± 0.0 | 0.5 ± 0.0 | 0.6 ± 0.0 | 0.7 ± 0.0 | 0.8 "
    "| 4 (3/3) | never (0/3) |\n"
    "| ppo-as | 0.9 [0.8, 1.0] | **+0.8 [+0.7, +0.9]** | 1.0 ± 0.0 | 0.0 ± 0.0 | 0.1 ± 0.0 | 0.2 ± 0.0 | 0.3 ± 0.0 "
    "| 0.9 ± 0.0 | 0.8 | 4 (3/3) | 56 (3/3) |\n"
)
SUMMARY = (
    "| variant | reward [95% CI] | reward − vanilla [95% CI] | AS proxy | BT proxy | I_AS (nats) | oracle reward "
    "| steps to reward 0.5 |\n"
    "|---|---|---|---|---|---|---|---|\n"
    "| ppo-vanilla | 0.1 [0.1, 0.1] | - | 0.2 ± 0.0 | 0.3 ± 0.0 | 0.6 ± 0.0 | 0.7 ± 0.0 | never (0/3) |\n"
    "| ppo-as | 0.9 [0.8, 1.0] | **+0.8 [+0.7, +0.9]** | 1.0 ± 0.0 | 0.0 ± 0.0 | 0.3 ± 0.0 | 0.9 ± 0.0 | 56 (3/3) |\n"
)
LAB_README = "# lab\n\nintro 0.850 ± 0.048, see `<!-- lab:default:start -->`\n\n<!-- lab:default:start -->\n| old | table |\n|---|---|\n<!-- lab:default:end -->\n\nafter\n"
MAIN_README = "top\n<!-- lab:default-summary:start -->\nstale\n<!-- lab:default-summary:end -->\ntail, no newline"


def _run(tmp_path, config=None):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.md").write_text(RESULTS)
    (run / "config.json").write_text(json.dumps({"config": asdict(config or LabConfig()), "wall_seconds": 1.0}))
    return run


def _readmes(tmp_path):
    lab, top = tmp_path / "lab.md", tmp_path / "top.md"
    lab.write_text(LAB_README)
    top.write_text(MAIN_README)
    return lab, top


def test_replaces_exactly_the_marked_blocks(tmp_path):
    run, (lab, top) = _run(tmp_path), _readmes(tmp_path)
    publish(run, (lab, top))
    before, after = LAB_README.split("<!-- lab:default:start -->\n")[0], LAB_README.split("<!-- lab:default:end -->")[1]
    assert "see `<!-- lab:default:start -->`" in before  # a marker quoted in prose is text
    assert lab.read_text() == before + "<!-- lab:default:start -->\n" + RESULTS + "<!-- lab:default:end -->" + after
    assert top.read_text() == (
        "top\n<!-- lab:default-summary:start -->\n" + SUMMARY + "<!-- lab:default-summary:end -->\ntail, no newline"
    )
    publish(run, (lab, top))  # idempotent
    assert lab.read_text().count(RESULTS) == 1 and top.read_text().count(SUMMARY) == 1


def test_summary_keeps_the_cells():
    assert summary_table(RESULTS) == SUMMARY


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all\n",
        "only quoted: `<!-- lab:default:start -->` and `<!-- lab:default:end -->`\n",
        "<!-- lab:default:start -->\nno end\n",
        "no start\n<!-- lab:default:end -->\n",
        "<!-- lab:default:start -->\na\n<!-- lab:default:end -->\n<!-- lab:default:start -->\nb\n<!-- lab:default:end -->\n",
    ],
)
def test_missing_or_broken_markers_fail_and_write_nothing(tmp_path, text):
    run, (lab, _top) = _run(tmp_path), _readmes(tmp_path)
    broken = tmp_path / "broken.md"
    broken.write_text(text)
    with pytest.raises(PublishError, match="broken.md"):
        publish(run, (lab, broken))
    assert lab.read_text() == LAB_README and broken.read_text() == text  # checked before any write


def test_refuses_a_run_that_is_not_the_default_study(tmp_path):
    run, (lab, _top) = _run(tmp_path, replace(LabConfig(), steps=6)), _readmes(tmp_path)
    with pytest.raises(PublishError, match="steps"):
        publish(run, (lab,))
    publish(run, (lab,), any_config=True)
    assert RESULTS in lab.read_text()
    with pytest.raises(SystemExit, match="not the default study"):
        main([str(run), "--target", str(lab)])


def test_the_repository_readmes_carry_the_markers():
    lab, top = TARGETS
    assert "<!-- lab:default:start -->" in lab.read_text() and "<!-- lab:default:end -->" in lab.read_text()
    assert "<!-- lab:default-summary:start -->" in top.read_text() and "<!-- lab:default-summary:end -->" in top.read_text()


def test_the_runs_record_holds_each_runs_held_out_numbers_and_arithmetic(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(PublishError, match="no runs"):
        runs_record(run)
    for variant, seed, reward in (("ppo-as", 1, 0.25), ("ppo-as", 0, 0.5), ("grpo-as", 0, 0.75)):
        folder = run / "runs" / variant
        folder.mkdir(parents=True, exist_ok=True)
        payload = {"variant": variant, "seed": seed, "final": {"reward": reward}, "arithmetic": {"aten": "AVX2"}, "log": []}
        (folder / f"seed{seed}.json").write_text(json.dumps(payload))
    record = json.loads(runs_record(run))
    assert record["config"] == json.loads(json.dumps(asdict(LabConfig())))
    assert record["runs"] == {
        "grpo-as": {"0": {"final": {"reward": 0.75}, "arithmetic": {"aten": "AVX2"}}},
        "ppo-as": {"0": {"final": {"reward": 0.5}, "arithmetic": {"aten": "AVX2"}}, "1": {"final": {"reward": 0.25}, "arithmetic": {"aten": "AVX2"}}},
    }
    # with explicit targets the repository's record is left alone
    lab, _top = _readmes(tmp_path)
    assert publish(run, (lab,)) == [lab]


def _vendor_run(tmp_path, name, vendor, shift):
    """A default-config run folder on ``vendor``: every arm of the readings, three equal seeds (intervals of width 0)."""
    from arew.lab.compare import READINGS

    run = tmp_path / name
    arms = {arm for pair in READINGS for arm in pair}
    for arm in arms:
        base = 0.1 if arm.endswith("vanilla") else 0.8
        for seed in range(3):
            path = run / "runs" / arm / f"seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            reward = base + shift + (0.3 if arm == "ppo-as+bt" and vendor == "GenuineIntel" else 0.0)
            path.write_text(json.dumps({"variant": arm, "seed": seed, "final": {"reward": reward},
                                        "arithmetic": {"cpu_vendor": vendor}}))  # fmt: skip
    (run / "config.json").write_text(json.dumps({"config": asdict(LabConfig())}))
    return run


def test_the_second_vendor_table_gives_each_readings_verdict_on_both_vendors(tmp_path, monkeypatch):
    from arew.lab.compare import READINGS
    from docgen import lab_publish as publishing

    amd, intel = _vendor_run(tmp_path, "amd", "AuthenticAMD", 0.0), _vendor_run(tmp_path, "intel", "GenuineIntel", 0.01)
    record, second, page = tmp_path / "record.json", tmp_path / "second.json", tmp_path / "results.md"
    record.write_text(runs_record(amd))
    page.write_text("x\n<!-- lab:vendors:start -->\nold\n<!-- lab:vendors:end -->\n")
    monkeypatch.setattr(publishing, "RUNS_RECORD", record)
    monkeypatch.setattr(publishing, "SECOND_VENDOR_RECORD", second)
    publishing.publish_second_vendor(intel, page)
    table = page.read_text()
    assert "| A − B (held-out reward) | AuthenticAMD | GenuineIntel | same verdict |" in table
    # Intel's ppo-as+bt is 0.3 higher: above ppo-as there, level on AMD; every other verdict is the same
    assert "| ppo-as+bt − ppo-as | +0.000 [+0.000, +0.000] not resolved | +0.300 [+0.300, +0.300] higher | **no** |" in table
    # it also parts the three other readings that compare ppo-as+bt with an arm of the same level: GRPO, flip, ir
    assert f"{len(READINGS) - 4} of {len(READINGS)} verdicts agree" in table
    assert json.loads(second.read_text()) == json.loads(runs_record(intel))
    with pytest.raises(PublishError, match="ran on AuthenticAMD, as the published run did"):
        publishing.publish_second_vendor(amd, page)
