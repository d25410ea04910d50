"""Resolve the GPU install against the package index, installing nothing, and verify launch/gpu_pins.toml.

    python launch/check_gpu_pins.py      (network; Python 3.11+; pip's configuration applies, so on a machine
                                          whose pip prefers local CPU wheels run it with PIP_CONFIG_FILE=/dev/null)

It runs ``pip install --dry-run --ignore-installed --report - torch==<pin> ".[gpu]"`` in the project folder, with
launch/install_gpu.sh's torch pin, and prints whether that resolves and the versions it picks. Then it reports
every problem: a package the install would build from source (beyond gpu_pins.toml's builds_in_isolation), a
torch without CUDA, a vllm that declares other requirements than gpu_pins.toml records (with the lines to write
there instead), a source_only package that now has a wheel. Exit status 0 when it resolves without a problem.
tests/install/test_gpu_pins.py reads the same file offline and imports the helpers below.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
FACTS = ROOT / "launch" / "gpu_pins.toml"
TASK_PYPROJECTS = sorted(ROOT.glob("envs/*/pyproject.toml"))
INSTALL_SCRIPT = ROOT / "launch" / "install_gpu.sh"
_EXTRA_MARKER = re.compile(r"\bextra\s*==")


def load_toml(path: Path) -> dict:
    return tomllib.loads(path.read_text())


def extra(pyproject: dict, name: str) -> list[Requirement]:
    return [Requirement(line) for line in pyproject["project"]["optional-dependencies"][name]]


def core(pyproject: dict) -> dict[str, Requirement]:
    return {canonicalize_name(req.name): req for req in map(Requirement, pyproject["project"]["dependencies"])}


def pins(text: str, name: str) -> list[str]:
    """The versions that ``name==VERSION`` fixes anywhere in ``text`` (a script, a README)."""
    return re.findall(rf"(?<![\w.-]){re.escape(name)}==([0-9][0-9A-Za-z.+!]*[0-9A-Za-z])", text)


def single_pin(text: str, name: str, where: str) -> str:
    found = set(pins(text, name))
    if len(found) != 1:
        raise ValueError(f"{where} should pin one {name}==VERSION, found {sorted(found) or 'none'}")
    return found.pop()


def exact_version(req: Requirement) -> str | None:
    """The version a requirement fixes with ``==``, else None."""
    fixed = [spec.version for spec in req.specifier if spec.operator == "=="]
    return fixed[0] if len(fixed) == 1 else None


def extra_requirements(distribution: str, requires_dist: list[str], extras: list[str]) -> list[Requirement]:
    """What ``distribution[extras]`` adds to the distribution's own requirements, following the extras it names
    of itself (verl's ``fsdp`` names ``verl[verl-core]``)."""
    found, todo, seen = [], list(extras), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in requires_dist:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}) or not req.marker.evaluate({"extra": name}):
                continue  # not one of this extra's requirements
            if canonicalize_name(req.name) == canonicalize_name(distribution):
                todo.extend(req.extras)
            else:
                found.append(req)
    return found


def recorded_requires(vllm_requires_dist: list[str], names: set[str]) -> list[str]:
    """What gpu_pins.toml records of vllm's requirements: those with a version, of a package in ``names``."""
    kept = []
    for line in vllm_requires_dist:
        req = Requirement(line)
        if req.marker is not None and _EXTRA_MARKER.search(str(req.marker)):
            continue  # a requirement of one of vllm's own extras
        if req.specifier and canonicalize_name(req.name) in names:
            kept.append(str(req))
    return kept


def named_packages(pyproject: dict, verl_requires_dist: list[str]) -> set[str]:
    """The project's dependencies, the gpu extra, the task packages' dependencies (the GPU install installs them
    too) and verl's fsdp extra, by name."""
    fsdp = extra_requirements("verl", verl_requires_dist, ["fsdp"])
    tasks = [requirement for path in TASK_PYPROJECTS for requirement in core(load_toml(path)).values()]
    return {canonicalize_name(req.name) for req in [*core(pyproject).values(), *extra(pyproject, "gpu"), *tasks, *fsdp]} - {"arew"}


def is_cuda_build(torch_requires_dist: list[str]) -> bool:
    names = (canonicalize_name(Requirement(line).name) for line in torch_requires_dist)
    return any(name.startswith(("nvidia-", "cuda-")) for name in names)


def resolve_problems(report: dict, pyproject: dict, facts: dict) -> list[str]:
    """What is wrong with a resolved ``.[gpu]`` (pip's installation report) for the project and gpu_pins.toml."""
    items = {canonicalize_name(item["metadata"]["name"]): item for item in report["install"]}
    missing = [name for name in ("torch", "vllm", "verl") if name not in items]
    if missing:
        return [f"{', '.join(missing)} not in the resolved set"]
    problems = []
    for name, item in sorted(items.items()):
        url = item["download_info"]["url"]
        if "dir_info" in item["download_info"] or url.endswith(".whl") or name in facts["builds_in_isolation"]:
            continue
        problems.append(
            f"{name} {item['metadata']['version']} would build from source ({url.rsplit('/', 1)[-1]}): if its build "
            "imports torch it cannot come through an extra (launch/install_gpu.sh installs such packages), else add "
            "it to builds_in_isolation in gpu_pins.toml"
        )
    torch = items["torch"]
    if not is_cuda_build(torch["metadata"].get("requires_dist", [])):
        problems.append(
            f"torch {torch['metadata']['version']} is not a CUDA build ({torch['download_info']['url']}): pip took it "
            "from a CPU index or find-links folder; PIP_CONFIG_FILE=/dev/null resolves against PyPI alone"
        )
    vllm = items["vllm"]["metadata"]
    if vllm["version"] != facts["vllm"]["version"]:
        problems.append(f"vllm resolved to {vllm['version']}, gpu_pins.toml records {facts['vllm']['version']}")
    names = named_packages(pyproject, items["verl"]["metadata"].get("requires_dist", []))
    declared = recorded_requires(vllm.get("requires_dist", []), names)
    if declared != facts["vllm"]["requires"]:
        lines = "".join(f'    "{line}",\n' for line in declared)
        problems.append(
            f"vllm {vllm['version']} declares other requirements than gpu_pins.toml records; write there:\n"
            f"requires = [\n{lines}]"
        )
    return problems


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=ROOT, capture_output=True, text=True)


def wheel_problem(name: str, version: str) -> str | None:
    """None when ``name==version`` has no wheel for this machine on the index (gpu_pins.toml's source_only)."""
    done = _pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--only-binary", ":all:", "--quiet",
                f"{name}=={version}")
    if done.returncode == 0:
        return f"{name}=={version} now has a wheel for this machine: gpu_pins.toml's source_only is out of date"
    if "No matching distribution" not in done.stderr:
        return f"could not look up {name}=={version}: {done.stderr.strip()}"
    return None


def main() -> int:
    pyproject, facts = load_toml(PYPROJECT), load_toml(FACTS)
    script = INSTALL_SCRIPT.read_text()
    torch_pin = single_pin(script, "torch", INSTALL_SCRIPT.name)
    args = ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", f"torch=={torch_pin}", ".[gpu]"]
    print("pip " + " ".join(args))
    done = _pip(*args)
    if done.returncode != 0:
        print(f"does NOT resolve (pip exit status {done.returncode}):\n{done.stderr.strip()}")
        return 1
    report = json.loads(done.stdout)
    versions = {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}
    shown = ["torch", "torchvision", "torchaudio", "vllm", "verl", "transformers"]
    shown += [name for name in (canonicalize_name(req.name) for req in extra(pyproject, "gpu")) if name not in shown]
    picked = ", ".join(f"{name} {versions.get(name, '(absent)')}" for name in shown)
    print(f"resolves: {len(versions)} packages; {picked}")
    problems = resolve_problems(report, pyproject, facts)
    for name in facts["source_only"]:
        problem = wheel_problem(name, single_pin(script, name, INSTALL_SCRIPT.name))
        problems += [problem] if problem else []
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not problems:
        print(f"no problem: nothing builds from source but {', '.join(facts['builds_in_isolation'])}; torch is a CUDA "
              f"build; gpu_pins.toml holds; {', '.join(facts['source_only'])} still has no wheel")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
