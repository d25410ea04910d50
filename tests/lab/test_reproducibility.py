"""What is true of the lab's arithmetic, checked: within a processor vendor a run's numbers do not depend on the
machine (workers run with every library pinned to AVX2), so a fresh run reproduces the one recorded on its vendor
exactly (docs/reference/lab-reproduction-runs.json, one per vendor, and the default run's record
docs/reference/lab-default-runs.json, both written by ``python -m docgen.lab_publish``). Between Intel and AMD the
runs part (arew.lab.reproducibility), so the published conclusions rest on intervals over the default run's ten
seeds (arew.lab.report.bootstrap_interval), and the last test holds the published table to the recorded seeds."""

import json
import math

import numpy as np
import pytest

from arew.lab.compare import record_vendor, vendor_table
from arew.lab.config import LabConfig, parse_variant
from arew.lab.report import bootstrap_interval
from arew.lab.reproducibility import PINNED_ENVIRONMENT, cpu_vendor, is_pinned, pinned_environment
from arew.lab.runner import run_key
from arew.lab.train import FINAL_COLUMNS
from docgen.lab_publish import (
    REPO,
    REPRODUCTION_RECORD,
    REPRODUCTION_RUN,
    RUNS_RECORD,
    SECOND_VENDOR_RECORD,
    reproduction_reference,
    reproduction_run,
)

RECORD = json.loads(RUNS_RECORD.read_text())
LAB_RESULTS = REPO / "docs" / "reference" / "lab-results.md"


def test_the_pins_cover_each_library_and_leave_the_rest_of_the_environment():
    pinned = pinned_environment({"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx512"})
    assert pinned["PATH"] == "/bin" and pinned["ATEN_CPU_CAPABILITY"] == "avx2" and is_pinned(pinned)
    assert not is_pinned({"PATH": "/bin"})
    assert {"ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES"} <= set(PINNED_ENVIRONMENT)
    # the cache of study runs keys on the pins: a run under other pins is another run
    config, variant = LabConfig(), parse_variant("ppo-ir")
    assert repr(dict(PINNED_ENVIRONMENT)) in run_key(config, variant, 0)


def test_every_published_run_was_computed_with_the_pinned_arithmetic():
    runs = [run for seeds in RECORD["runs"].values() for run in seeds.values()]
    assert len(runs) == len(LabConfig().variants) * len(LabConfig().seeds)
    for run in runs:
        arithmetic = run["arithmetic"]
        assert arithmetic["aten"] == "AVX2" and arithmetic["numpy_avx512"] == "no", run
        assert arithmetic["mkl_cbwr"] == PINNED_ENVIRONMENT["MKL_CBWR"], run


@pytest.mark.lab
def test_a_fresh_run_reproduces_the_published_one_of_its_cpu_vendor_exactly():
    """ppo-ir, seed 0 of the published default run: the run whose reward once read 0.871 on one 2-core
    machine and 0.855 on another. Here it trains in the lab's own pinned worker process."""
    config = LabConfig()
    assert RECORD["config"] == json.loads(json.dumps(config.to_dict()))  # the published run is the default one
    result = reproduction_run()
    published = reproduction_reference(cpu_vendor())
    assert result.arithmetic["aten"] == "AVX2" and result.arithmetic["numpy_avx512"] == "no"
    assert result.arithmetic["mkl_cbwr"] == PINNED_ENVIRONMENT["MKL_CBWR"]
    assert result.arithmetic["torch"] == published["arithmetic"]["torch"], "published with another torch: republish"
    for column in FINAL_COLUMNS:
        ours, theirs = result.final[column], published["final"][column]
        assert ours == theirs or (math.isnan(ours) and math.isnan(theirs)), (column, ours, theirs)


def test_both_vendors_have_a_record_and_the_default_run_names_its_vendor():
    recorded = json.loads(REPRODUCTION_RECORD.read_text())
    assert {"GenuineIntel", "AuthenticAMD"} <= set(recorded)
    vendors = {run["arithmetic"].get("cpu_vendor") for seeds in RECORD["runs"].values() for run in seeds.values()}
    assert len(vendors) == 1 and None not in vendors  # one machine's run, and which vendor it was is known
    variant, seed = REPRODUCTION_RUN
    assert recorded[vendors.pop()]["final"] == RECORD["runs"][variant][str(seed)]["final"]  # the same arithmetic


def test_the_published_intervals_are_those_of_the_recorded_seeds():
    """Every interval the default table prints is the bootstrap over the seeds in the record: a conclusion read
    from the table (resolved or not) is one a reader recomputes from the record."""
    table = LAB_RESULTS.read_text().split("<!-- lab:default:start -->")[1].split("<!-- lab:default:end -->")[0]
    rows = {cells[1].strip(): cells for cells in (line.split("|") for line in table.strip().splitlines()[2:])}
    rewards = {v: [seeds[str(s)]["final"]["reward"] for s in sorted(map(int, seeds))] for v, seeds in RECORD["runs"].items()}
    assert set(rows) == set(rewards)
    for variant, values in rewards.items():
        low, high = bootstrap_interval(values)
        assert rows[variant][2].strip() == f"{np.mean(values):.3f} [{low:.3f}, {high:.3f}]", variant
        vanilla = rewards[f"{variant.split('-')[0]}-vanilla"]
        if variant.endswith("-vanilla"):
            continue
        low, high = bootstrap_interval(values, vanilla)
        cell = f"{np.mean(values) - np.mean(vanilla):+.3f} [{low:+.3f}, {high:+.3f}]"
        assert rows[variant][3].strip() == (f"**{cell}**" if low > 0 or high < 0 else cell), variant


def test_a_vendor_without_its_own_record_is_held_to_the_default_run():
    published = RECORD["runs"]["ppo-ir"]["0"]
    assert reproduction_reference("NoSuchVendor") == published
    for vendor, run in json.loads(REPRODUCTION_RECORD.read_text()).items():  # each recorded on a CPU of its vendor
        assert run["arithmetic"]["cpu_vendor"] == vendor and (run["variant"], run["seed"]) == REPRODUCTION_RUN
        assert reproduction_reference(vendor) == run


def test_the_two_vendors_verdicts_are_those_of_their_records():
    """The default run made on the other vendor (docs/reference/lab-second-vendor-runs.json) with the published
    one's config, and the table of the readings' verdicts on both recomputed from the two records."""
    second = json.loads(SECOND_VENDOR_RECORD.read_text())
    assert second["config"] == RECORD["config"]
    assert {record_vendor(RECORD), record_vendor(second)} == {"GenuineIntel", "AuthenticAMD"}
    table = LAB_RESULTS.read_text().split("<!-- lab:vendors:start -->\n")[1].split("<!-- lab:vendors:end -->")[0]
    assert table == vendor_table(RECORD, second)
