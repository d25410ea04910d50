"""The GPU install keeps verl's pins: resolve it against the package index (installing nothing), or check an environment.

    python launch/check_gpu_pins.py              network (the package index); Python 3.11+. pip's configuration
                                                 applies: on a machine whose pip prefers local CPU wheels, run it
                                                 with PIP_CONFIG_FILE=/dev/null
    python launch/check_gpu_pins.py --installed  offline: this environment's versions against verl's pins
                                                 (launch/install_gpu.sh ends with it; --skip NAME leaves one out)

AReW is a plugin: installing it must not change a version verl 0.9.1's GPU extras (``vllm`` and ``fsdp``) pin
with ``==`` (vllm 0.24.0, torch 2.11.0, transformers 5.9.0, ...; :func:`verl_pins` reads them from verl's own
metadata). The resolve runs ``pip install --dry-run --ignore-installed --report -`` three times:

1. *verl's set*: ``verl==0.9.1`` with everything its ``vllm`` and ``fsdp`` extras require except the source-only
   packages (flash-attn: pip reads its metadata only by building it, and its build imports torch);
2. *the GPU install*: ``torch==<pin> ".[gpu]"`` and the task packages, as launch/install_gpu.sh installs them;
3. *AReW into an existing verl environment*: the project and its task packages with set 1's versions as
   constraints, as ``pip install`` into a verl environment would keep them.

Then it reports every problem: a pin of verl's that set 2 moves, any version of set 1 that set 2 moves, set 3
not resolving, a package set 2 would build from source (beyond gpu_pins.toml's builds_in_isolation), a torch
without CUDA, a vllm that declares other requirements than gpu_pins.toml records (with the lines to write
there instead), a source_only package that now has a wheel. Exit status 0 when there is none.
tests/install/test_gpu_pins.py reads the same files offline and imports the helpers below.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
FACTS = ROOT / "launch" / "gpu_pins.toml"
TASK_PYPROJECTS = sorted(ROOT.glob("envs/*/pyproject.toml"))
INSTALL_SCRIPT = ROOT / "launch" / "install_gpu.sh"
VERL_GPU_EXTRAS = ("vllm", "fsdp")  # the extras of verl a GPU run of AReW uses: the vLLM rollout and the FSDP engine
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


def requirement_line(req: Requirement) -> str:
    """``req`` as a command-line requirement: an extra's marker (``extra == "fsdp"``) would make pip skip it."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def verl_pins(verl_requires_dist: list[str]) -> dict[str, str]:
    """Every version verl's GPU extras fix with ``==``, by package name: what installing AReW must leave as it is."""
    fixed = {}
    for req in extra_requirements("verl", verl_requires_dist, list(VERL_GPU_EXTRAS)):
        version = exact_version(req)
        if version is not None:
            fixed[canonicalize_name(req.name)] = version
    return fixed


def project_pins(pyproject: dict, script: str) -> dict[str, set[str]]:
    """The ``==`` versions the GPU install names: the gpu extra's requirements and launch/install_gpu.sh's lines."""
    named: dict[str, set[str]] = {}
    for req in extra(pyproject, "gpu"):
        version = exact_version(req)
        if version is not None:
            named.setdefault(canonicalize_name(req.name), set()).add(version)
    for name in re.findall(r"(?<![\w.-])([A-Za-z][\w.-]*)==[0-9]", script):
        named.setdefault(canonicalize_name(name), set()).update(pins(script, name))
    return named


def moved_pins(named: dict[str, set[str]], fixed: dict[str, str]) -> list[str]:
    """Where the GPU install names another version than verl pins."""
    return [f"{name}: the GPU install names {', '.join(sorted(versions))}, verl pins {fixed[name]}"
            for name, versions in sorted(named.items()) if name in fixed and versions != {fixed[name]}]  # fmt: skip


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
    too) and verl's GPU extras, by name."""
    verl_gpu = extra_requirements("verl", verl_requires_dist, list(VERL_GPU_EXTRAS))
    tasks = [requirement for path in TASK_PYPROJECTS for requirement in core(load_toml(path)).values()]
    return {canonicalize_name(req.name) for req in [*core(pyproject).values(), *extra(pyproject, "gpu"), *tasks, *verl_gpu]} - {"arew"}


def is_cuda_build(torch_requires_dist: list[str]) -> bool:
    names = (canonicalize_name(Requirement(line).name) for line in torch_requires_dist)
    return any(name.startswith(("nvidia-", "cuda-")) for name in names)


def resolved_versions(report: dict) -> dict[str, str]:
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}


def moved_versions(verl_set: dict[str, str], gpu_set: dict[str, str]) -> list[str]:
    """The packages of verl's own GPU set that the GPU install resolves to another version."""
    return [f"{name}: verl's set resolves {version}, the GPU install {gpu_set[name]}"
            for name, version in sorted(verl_set.items()) if name in gpu_set and gpu_set[name] != version]  # fmt: skip


def resolve_problems(report: dict, pyproject: dict, facts: dict) -> list[str]:
    """What is wrong with a resolved GPU install (pip's installation report) for the project, verl's pins and
    gpu_pins.toml."""
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
    verl_requires = items["verl"]["metadata"].get("requires_dist", [])
    resolved = resolved_versions(report)
    problems += [f"installing AReW moves verl's pin of {name}: {fixed} -> {resolved[name]}"
                 for name, fixed in sorted(verl_pins(verl_requires).items()) if name in resolved and resolved[name] != fixed]  # fmt: skip
    vllm = items["vllm"]["metadata"]
    if vllm["version"] != facts["vllm"]["version"]:
        problems.append(f"vllm resolved to {vllm['version']}, gpu_pins.toml records {facts['vllm']['version']}")
    declared = recorded_requires(vllm.get("requires_dist", []), named_packages(pyproject, verl_requires))
    if declared != facts["vllm"]["requires"]:
        lines = "".join(f'    "{line}",\n' for line in declared)
        problems.append(
            f"vllm {vllm['version']} declares other requirements than gpu_pins.toml records; write there:\n"
            f"requires = [\n{lines}]"
        )
    return problems


def installed_problems(fixed: dict[str, str], installed) -> list[str]:
    """Where this environment differs from verl's pins; ``installed(name)`` is the version or None. A local part
    (``+cu130``) is the build, not another release."""
    problems = []
    for name, version in sorted(fixed.items()):
        found = installed(name)
        if found is None:
            problems.append(f"{name} is not installed (verl pins {version})")
        elif Version(found).public != Version(version).public:
            problems.append(f"{name} {found} is installed, verl pins {version}")
    return problems


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=ROOT, capture_output=True, text=True)


def _resolve(label: str, *requirements: str) -> dict | None:
    args = ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", *requirements]
    print(f"{label}: pip {' '.join(args)}")
    done = _pip(*args)
    if done.returncode != 0:
        print(f"  does NOT resolve (pip exit status {done.returncode}):\n{done.stderr.strip()}")
        return None
    report = json.loads(done.stdout)
    print(f"  resolves: {len(report['install'])} packages")
    return report


def wheel_problem(name: str, version: str) -> str | None:
    """None when ``name==version`` has no wheel for this machine on the index (gpu_pins.toml's source_only)."""
    done = _pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--only-binary", ":all:", "--quiet",
                f"{name}=={version}")
    if done.returncode == 0:
        return f"{name}=={version} now has a wheel for this machine: gpu_pins.toml's source_only is out of date"
    if "No matching distribution" not in done.stderr:
        return f"could not look up {name}=={version}: {done.stderr.strip()}"
    return None


def check_installed(skipped: list[str]) -> int:
    fixed = verl_pins(importlib.metadata.requires("verl") or [])
    for name in map(canonicalize_name, skipped):
        fixed.pop(name, None)
    problems = installed_problems(fixed, _installed_version)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not problems:
        print(f"verl's pins hold: {', '.join(f'{name} {version}' for name, version in sorted(fixed.items()))}")
    return 1 if problems else 0


def check_index() -> int:
    pyproject, facts = load_toml(PYPROJECT), load_toml(FACTS)
    script = INSTALL_SCRIPT.read_text()
    torch_pin = single_pin(script, "torch", INSTALL_SCRIPT.name)
    tasks = [str(path.parent.relative_to(ROOT)) for path in TASK_PYPROJECTS]
    gpu = _resolve("the GPU install", f"torch=={torch_pin}", ".[gpu]", *tasks)
    if gpu is None:
        return 1
    verl_requires = {canonicalize_name(item["metadata"]["name"]): item for item in gpu["install"]}["verl"]["metadata"]["requires_dist"]
    fixed = verl_pins(verl_requires)
    problems = moved_pins(project_pins(pyproject, script), fixed) + resolve_problems(gpu, pyproject, facts)
    source_only = {canonicalize_name(name) for name in facts["source_only"]}
    verl_gpu = [requirement_line(req) for req in extra_requirements("verl", verl_requires, list(VERL_GPU_EXTRAS))
                if canonicalize_name(req.name) not in source_only]  # fmt: skip
    verl_set = _resolve("verl's own set", "verl==0.9.1", *verl_gpu)
    if verl_set is None:
        problems.append("verl's own GPU set does not resolve (above)")
    else:
        problems += moved_versions(resolved_versions(verl_set), resolved_versions(gpu))
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
            constraints.write("".join(f"{name}=={version}\n" for name, version in sorted(resolved_versions(verl_set).items())))
            constraints.flush()
            if _resolve("AReW into verl's environment", "-c", constraints.name, ".", *tasks) is None:
                problems.append("AReW and its task packages do not install into verl's GPU set without changing a version")
    for name in facts["source_only"]:
        problem = wheel_problem(name, single_pin(script, name, INSTALL_SCRIPT.name))
        problems += [problem] if problem else []
    versions = resolved_versions(gpu)
    shown = ["torch", "torchvision", "torchaudio", "vllm", "verl", "transformers"]
    print("the GPU install picks: " + ", ".join(f"{name} {versions.get(name, '(absent)')}" for name in shown))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if not problems:
        print(f"no problem: every pin of verl[{','.join(VERL_GPU_EXTRAS)}]==0.9.1 holds and no version of verl's set "
              f"moves; AReW installs into verl's set as it is; nothing builds from source but "
              f"{', '.join(facts['builds_in_isolation'])}; torch is a CUDA build; gpu_pins.toml holds; "
              f"{', '.join(facts['source_only'])} still has no wheel")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--installed", action="store_true", help="check this environment's versions against verl's pins (offline)")
    parser.add_argument("--skip", action="append", default=[], metavar="NAME",
                        help="with --installed: a pinned package this environment leaves out on purpose (flash-attn for SDPA runs)")
    args = parser.parse_args()
    return check_installed(args.skip) if args.installed else check_index()


if __name__ == "__main__":
    sys.exit(main())
