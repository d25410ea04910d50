"""``arew new-task``: the package it writes, and the example it is checked against.

envs/number_search is the template's output for ``number-search`` (one source: editing the example means editing
the template); the wheel test (tests/e2e/test_wheel_install.py) writes a new task with the installed command and
trains it through ``main_ppo``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arew.cli import main
from arew.envs.new_task import names, write

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "envs" / "number_search"


def test_the_example_task_is_the_template_s_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = write("number-search", "envs/number_search")
    assert {path.relative_to("envs/number_search").as_posix() for path in written} == {
        path.relative_to(EXAMPLE).as_posix() for path in EXAMPLE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and ".egg-info" not in str(path)
    }
    for path in written:
        assert path.read_text() == (ROOT / path).read_text(), f"{path} differs from the template's output: edit arew/envs/task_template"


def test_a_new_task_gets_names_that_cannot_collide(tmp_path, capsys):
    main(["new-task", "twenty-questions", "--out", str(tmp_path / "tq")])
    assert "pip install -e" in capsys.readouterr().out
    package = tmp_path / "tq" / "arew_twenty_questions"
    assert (package / "configs" / "task" / "twenty-questions.yaml").is_file()
    assert 'twenty_questions = "arew_twenty_questions:TASK_SPECS"' in (tmp_path / "tq" / "pyproject.toml").read_text()
    assert "class TwentyQuestionsEnv(" in (package / "env.py").read_text()
    assert names("twenty-questions", "x")["distribution"] == "arew-twenty-questions"


@pytest.mark.parametrize("bad", ["Twenty", "9lives", "a.b", "with space", ""])
def test_a_bad_name_or_an_existing_folder_is_refused(tmp_path, bad):
    with pytest.raises(SystemExit, match="task name"):
        main(["new-task", bad, "--out", str(tmp_path / "new")])
    with pytest.raises(SystemExit, match="exists"):
        main(["new-task", "fine", "--out", str(tmp_path)])
