"""The lab's numbers do not depend on the machine within a processor vendor: workers run with every library pinned to
AVX2, and a fresh run reproduces a published one of the same vendor exactly (docs/reference/lab-default-runs.json,
the default run published on an Intel CPU, and docs/reference/lab-reproduction-runs.json per vendor, both written
by ``python -m arew.lab.publish``). Between Intel and AMD the runs part (arew.lab.reproducibility)."""

import json
import math

import pytest

from arew.lab.config import LabConfig, parse_variant
from arew.lab.publish import (
    REPRODUCTION_RECORD,
    REPRODUCTION_RUN,
    RUNS_RECORD,
    reproduction_reference,
    reproduction_run,
)
from arew.lab.reproducibility import PINNED_ENVIRONMENT, cpu_vendor, is_pinned, pinned_environment
from arew.lab.runner import run_key
from arew.lab.train import FINAL_COLUMNS

RECORD = json.loads(RUNS_RECORD.read_text())


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


def test_a_vendor_without_its_own_record_is_held_to_the_default_run():
    published = RECORD["runs"]["ppo-ir"]["0"]
    assert reproduction_reference("NoSuchVendor") == published
    for vendor, run in json.loads(REPRODUCTION_RECORD.read_text()).items():  # each recorded on a CPU of its vendor
        assert run["arithmetic"]["cpu_vendor"] == vendor and (run["variant"], run["seed"]) == REPRODUCTION_RUN
        assert reproduction_reference(vendor) == run
