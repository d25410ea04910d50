"""`.ci/run` runs exactly the README's test command, which is the command `benchmarks/suite_times.py` times."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"Run the tests[^\n]*\n\n```bash\n(.+?)\n```", readme)
    assert block, "README.md: no code block after 'Run the tests'"
    return block.group(1).strip()


def test_ci_runs_the_readmes_test_command_and_the_suite_timer_times_it(monkeypatch):
    import importlib

    command = _readme_test_command()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert ci[-1] == command, f".ci/run must end with the README's test command {command!r}"
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    assert shlex.split(command)[1:] == importlib.import_module("suite_times").WHOLE
