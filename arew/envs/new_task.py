"""``arew new-task NAME``: a working task package to rewrite into your own, in minutes.

The package it writes is the number-search game of ``envs/number_search`` under the new name (that folder is
this template's output for ``number-search``, checked by the tests): its environment on the task SDK
(:mod:`arew.envs.beliefs`), prompts, data preparation, Hydra task config and tests, registered through the
``arew.tasks`` entry point. After ``pip install -e FOLDER`` every AReW command knows the task:
``arew prepare NAME``, ``arew eval NAME``, ``arew smoke --task NAME`` (verl's ``main_ppo``, with the package's
own config found through the entry point). docs/guides/writing-an-environment.md walks through each file.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from arew.plugins import NAME

TEMPLATE = "task_template"
# where each template file goes in the package folder ("package": the import package; "task", "module": names)
LAYOUT = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "package/__init__.py.tmpl": "{package}/__init__.py",
    "package/env.py.tmpl": "{package}/env.py",
    "package/data.py.tmpl": "{package}/data.py",
    "package/prompts.py.tmpl": "{package}/prompts.py",
    "package/configs/task/task.yaml.tmpl": "{package}/configs/task/{task}.yaml",
    "tests/test_module.py.tmpl": "tests/test_{module}.py",
}


def names(task: str, folder: str) -> dict[str, str]:
    """The template's placeholders for ``task`` written into ``folder`` (as the README shows it)."""
    if not NAME.fullmatch(task) or not task[0].isalpha() or "." in task:
        raise ValueError(f"task name {task!r}: start with a letter; then lower-case letters, digits, '-' or '_'")
    module = task.replace("-", "_")
    words = task.replace("_", "-").split("-")
    title = " ".join(words)
    return {
        "task": task,
        "module": module,
        "package": f"arew_{module}",  # cannot collide with another project's top-level module
        "distribution": f"arew-{task}",
        "Name": "".join(word.capitalize() for word in words),
        "Title": title[:1].upper() + title[1:],
        "title": title,
        "folder": folder,
    }


def render(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def write(task: str, folder: str | Path) -> list[Path]:
    """Write the package for ``task`` into ``folder`` (which must not exist yet); the files written."""
    folder = Path(folder)
    if folder.exists():
        raise FileExistsError(f"{folder} exists; arew new-task writes a new folder")
    values = names(task, folder.as_posix())
    template = resources.files("arew.envs").joinpath(TEMPLATE)
    written = []
    for source, target in LAYOUT.items():
        path = folder / target.format(**values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(template.joinpath(source).read_text(encoding="utf-8"), values), encoding="utf-8")
        written.append(path)
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="the new task's name (lower-case, '-' between words), e.g. twenty-questions")
    parser.add_argument("--out", default=None, help="the package folder to create (default: ./<name with _>)")


def main(args: argparse.Namespace) -> None:
    folder = args.out or args.task.replace("-", "_")
    try:
        written = write(args.task, folder)
    except (ValueError, FileExistsError) as error:
        raise SystemExit(f"arew new-task: {error}") from None
    print(f"wrote {len(written)} files in {folder}: pip install -e {folder}, then arew smoke --task {args.task}")
