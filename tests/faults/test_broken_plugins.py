"""The fault probe's broken plugins as a suite: beside the installed task and critique-source packages, one more
package whose entry point does not import, exits the process on import, holds the wrong type, or declares a name
another package declares. Through the commands a user types (``arew prepare --help``, ``arew prepare`` of a
built-in task, ``arew eval --help``, ``arew smoke --help``), every command works, the broken package is named once
(its entry point), and asking for its name says why it is missing. About 5 s (``smoke --help`` imports verl)."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest

from arew.cli import main
from arew.critiques import registry as sources
from arew.envs import registry as tasks

REAL_ENTRY_POINTS = importlib.metadata.entry_points

# how a package breaks -> (its entry point's target: None for a second declaration of an installed package's names,
# what the warning says of it)
BREAKAGES = {
    "does not import": ("no_such_package.plugins:SPECS", "ModuleNotFoundError: No module named 'no_such_package'"),
    "exits on import": (f"{__name__}:EXITS", "SystemExit: a plugin's own exit"),
    "the wrong type": (f"{__name__}:NOT_SPECS", "expected a sequence of"),
    "a name another package declares": (None, "is registered twice"),
}
SECOND_DECLARATION = {tasks.ENTRY_POINT_GROUP: "arew_mediq:TASK_SPECS", sources.ENTRY_POINT_GROUP: "arew.critiques:SOURCE_SPECS"}
NOT_SPECS = "mediq"


def __getattr__(name):
    if name == "EXITS":  # a plugin whose import ends the process, as a careless package may
        raise SystemExit("a plugin's own exit")
    raise AttributeError(name)


@pytest.fixture(params=list(BREAKAGES))
def broken(request, monkeypatch):
    """The installed packages plus one broken task package and one broken critique-source package."""
    target, _ = BREAKAGES[request.param]
    extra = {group: importlib.metadata.EntryPoint(f"broken-{noun}", target or SECOND_DECLARATION[group], group)
             for group, noun in ((tasks.ENTRY_POINT_GROUP, "task"), (sources.ENTRY_POINT_GROUP, "source"))}  # fmt: skip

    def entry_points(group=None, **kwargs):
        found = list(REAL_ENTRY_POINTS(group=group, **kwargs))
        return found + [extra[group]] if group in extra else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    for registry in (tasks.TASKS, sources.SOURCES):
        registry.installed.cache_clear()
    yield request.param
    for registry in (tasks.TASKS, sources.SOURCES):
        registry.installed.cache_clear()


def run(argv, capsys) -> tuple[int, str]:
    """``arew <argv>`` in this process: its exit code and what it printed."""
    try:
        main(argv)
        code = 0
    except SystemExit as stop:
        code = stop.code or 0
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_every_command_works_beside_a_broken_package_and_names_it_once(broken, capsys, caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="arew"):
        code, out = run(["prepare", "--help"], capsys)
        assert code == 0 and "pe-g-s2" in out and "tau2-solo" in out
        code, _ = run(["prepare", "pe-g-s2", "--out", str(tmp_path / "d"), "--n-train", "2", "--n-val", "1", "--n-test", "1"], capsys)
        assert code == 0 and (tmp_path / "d" / "train.parquet").is_file()
        assert run(["eval", "--help"], capsys)[0] == 0 and run(["smoke", "--help"], capsys)[0] == 0
        assert "contracts" in sources.source_names() and "pe-g-s2" in tasks.task_names()  # the other packages' plugins
        clash = broken == "a name another package declares"
        assert ("mediq" in tasks.task_names(), "judge" in sources.source_names()) == (not clash, not clash)
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    says = BREAKAGES[broken][1]
    for name in ("broken-task", "broken-source"):
        named = [message for message in warnings if f"entry point {name} " in message]
        # once: a package that does not load in one line, a second declaration in one line per name it declares again
        assert named and all(says in message for message in named) and len(named) == len(set(named)), warnings
        assert len(named) == 1 or broken == "a name another package declares"
    if broken == "a name another package declares":  # the name both declare is left out, and asking for it says why
        with pytest.raises(tasks.TaskRegistryError, match="'mediq' is registered twice: by entry point .* and by entry point broken-task"):
            tasks.task_spec("mediq")
