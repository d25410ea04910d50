"""The documentation site builds with ``mkdocs build --strict``, and strict mode does fail on a broken page.

CI runs the whole suite, so a broken link, a missing anchor, a nav entry without its page or an API
object that no longer loads fails CI here. The build takes a few seconds.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about MkDocs 2.0
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def test_the_docs_build_strictly(tmp_path):
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "site" / "method" / "index.html").is_file()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "reweight_advantages" in api and "ActiveReasoningEnv" in api  # mkdocstrings rendered the docstrings


def test_the_config_is_strict():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["docs_dir"] == "docs"
    assert config["validation"]["links"]["not_found"] == "warn"  # a warning fails a strict build
    assert config["validation"]["links"]["anchors"] == "warn"
    assert config["validation"]["nav"]["not_found"] == "warn"


BROKEN = {
    "a link to a missing page": ({"index.md": "# Home\n\nSee [the guide](guide.md).\n"}, ["index.md"], "guide.md"),
    "an anchor that does not exist": (
        {"index.md": "# Home\n\nSee [usage](other.md#usage).\n", "other.md": "# Other\n\n## Install\n"},
        ["index.md", "other.md"], "usage",
    ),
    "a nav entry without its page": ({"index.md": "# Home\n"}, ["index.md", "missing.md"], "missing.md"),
    "a page left out of the nav": ({"index.md": "# Home\n", "stray.md": "# Stray\n"}, ["index.md"], "stray.md"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_strict_mode_fails_on_a_broken_page(tmp_path, case):
    pages, nav, named = BROKEN[case]
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(docs_dir=str(docs), nav=nav)  # the project's own settings, another docs folder
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode != 0, f"a strict build passed with {case}:\n{output}"
    assert named in output and "Aborted" in output, output
