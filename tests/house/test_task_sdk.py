"""The task packages under envs/ are written on AReW's public task SDK, as a user's package is.

No task module imports an underscored name from ``arew``, reads or overrides an underscored name that only
``arew`` defines (the SDK's episode state and hooks are public: ``belief``, ``informative``, ``open_turn``,
``judge_belief``, ...), or reaches a private module. A task's own underscored names are its own business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASK_MODULES = sorted(path for path in (ROOT / "envs").glob("*/arew_*/**/*.py"))


def _defined_names(texts) -> set[str]:
    """Every underscored name the sources define: functions, classes, attributes assigned on any object."""
    names = set()
    for text in texts:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


AREW_PRIVATE = _defined_names(path.read_text() for path in (ROOT / "arew").rglob("*.py"))


def _package_names(package: str) -> set[str]:
    return _defined_names(path.read_text() for path in (ROOT / "envs" / package).glob("arew_*/**/*.py"))


def _violations(text: str, own: set[str]) -> list[str]:
    """What in ``text`` (a task module) goes past the public SDK; ``own``: the task package's own private names."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "arew":
            found += [f"imports {alias.name} from {node.module}" for alias in node.names if alias.name.startswith("_")]
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"imports the private module {node.module}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in AREW_PRIVATE - own:
            found.append(f"line {node.lineno}: overrides arew's private {node.name}")
        elif isinstance(node, ast.Attribute) and node.attr in AREW_PRIVATE - own:
            found.append(f"line {node.lineno}: reads arew's private {node.attr}")
    return found


def test_the_task_packages_are_found():
    assert {path.relative_to(ROOT / "envs").parts[0] for path in TASK_MODULES} == {"preference", "mediq", "flodial", "tau2", "number_search"}


@pytest.mark.parametrize("path", TASK_MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_task_module_uses_only_the_public_sdk(path):
    assert _violations(path.read_text(), _package_names(path.relative_to(ROOT / "envs").parts[0])) == []


def test_the_check_catches_a_private_import_a_private_hook_and_private_state():
    probe = "from arew.envs.parsing import _SCRATCH\n\n\ndef _record_belief(self):\n    return self._final_step\n"
    found = "\n".join(_violations(probe, _package_names("number_search")))
    assert "imports _SCRATCH from arew.envs.parsing" in found
    assert "overrides arew's private _record_belief" in found and "reads arew's private _final_step" in found
