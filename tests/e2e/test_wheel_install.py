"""Installed from wheels, not from the checkout: ``arew new-task`` writes a task package outside the repository,
it is built and installed as a user's package is, and ``arew smoke`` trains it through ``main_ppo`` with the
configs the wheels carry (``pkg://arew.configs`` and the new package's own ``configs/``, found through its entry
point).

The wheels are built from a copy of the project's files (setuptools builds in the source folder) and installed
with ``--no-deps`` into a fresh venv that sees this environment's third-party packages, never AReW's editable
installs. One ``main_ppo`` run (about 100 s, the wheel builds and installs included); it also is the training
check of ``arew new-task``'s output (envs/number_search is that output for its own name): the new package's own
diagnostic reaches verl's logger.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("pyproject.toml", "README.md", "arew", "hydra_plugins")
TASK_PACKAGES = ("preference", "mediq", "flodial", "tau2")
# what the checkout's editable installs put in site-packages: the fresh venv must not see them
EDITABLE = ("__editable__", "arew", "arew_", "arew-", "hydra_plugins")

pytestmark = pytest.mark.e2e


def _copy_sources(target: Path) -> list[Path]:
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    target.mkdir(parents=True)
    for name in PROJECT:
        source = ROOT / name
        shutil.copytree(source, target / name, ignore=skip) if source.is_dir() else shutil.copy(source, target / name)
    folders = [target]
    for task in TASK_PACKAGES:
        shutil.copytree(ROOT / "envs" / task, target / "envs" / task, ignore=skip)
        folders.append(target / "envs" / task)
    return folders


def _third_party_view(view: Path) -> Path:
    """This environment's site-packages without AReW's editable installs, as links in one folder."""
    view.mkdir()
    (packages,) = [Path(p) for p in site.getsitepackages() if Path(p).name == "site-packages"][:1]
    for entry in packages.iterdir():
        if not entry.name.startswith(EDITABLE) and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    return view


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheels")
    folders = _copy_sources(work / "source")
    wheels = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), *map(str, folders)],
                   check=True, capture_output=True)  # fmt: skip
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (child_packages,) = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                                       check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
    (Path(child_packages) / "third_party.pth").write_text(f"{_third_party_view(work / 'third-party')}\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", *map(str, sorted(wheels.glob("*.whl")))],
                   check=True, capture_output=True)  # fmt: skip
    return venv


def test_a_new_task_trains_through_main_ppo_from_the_wheels_outside_the_checkout(wheel_venv, tmp_path):
    python = wheel_venv / "bin" / "python"
    located = subprocess.run(
        [str(python), "-c", "import arew, arew.configs, arew_preference; print(arew.__file__); print(arew.configs.CONFIG_DIR); print(arew_preference.__file__)"],
        cwd=tmp_path, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(path).is_relative_to(wheel_venv) for path in located), located
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{wheel_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    arew = str(wheel_venv / "bin" / "arew")
    subprocess.run([arew, "new-task", "my-quiz", "--out", "my_quiz"], cwd=tmp_path, env=env, check=True, capture_output=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation", "./my_quiz"],
                   cwd=tmp_path, env=env, check=True, capture_output=True)  # fmt: skip
    done = subprocess.run(
        [arew, "smoke", "--task", "my-quiz", "--steps", "1", "--out", "run", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    log = tmp_path / "run" / "main_ppo.log"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + (log.read_text()[-4000:] if log.exists() else "")
    (entry,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    data = entry["data"]
    assert data["training/global_step"] == 1 and data["arew/decisions"] > 0
    assert "episode/proxy_n_possible/mean" in data  # the new task's own diagnostic reached verl's logger
