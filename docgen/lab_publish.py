"""``python -m docgen.lab_publish RUN_DIR``: write an ``arew lab`` run's tables into the docs pages.

The published lab numbers are generated, never typed: each docs page holds its table between
two markers (:mod:`arew.reporting.markdown_blocks`), and this command replaces exactly the text between
them with the run's ``results.md`` (nothing else in the file changes)::

    <!-- lab:default:start -->          docs/reference/lab-results.md: results.md as `arew lab` prints it
    <!-- lab:default:end -->
    <!-- lab:default-summary:start -->  docs/guides/lab.md: the same cells, fewer columns
    <!-- lab:default-summary:end -->

A study's folder (``arew lab --study NAME`` writes ``<out>/<NAME>/``, its config.json
records the study) goes into docs/reference/lab-results.md only, between
``<!-- lab:study:<NAME>:start -->`` and ``<!-- lab:study:<NAME>:end -->``; a folder of study
folders (``--study all``) publishes each of them.

The default run's publication also writes ``docs/reference/lab-default-runs.json``: each run's
held-out numbers and the arithmetic it ran with (:mod:`arew.lab.reproducibility`), which
tests/lab/test_reproducibility.py reproduces with a fresh run. Intel and AMD processors compute the lab's runs
differently (:mod:`arew.lab.reproducibility`), so ``python -m docgen.lab_publish --reproduction`` trains the run that
test retrains (:data:`REPRODUCTION_RUN`) on this machine and records its numbers under this CPU's vendor in
``docs/reference/lab-reproduction-runs.json``; the test compares with that vendor's entry, and with the default
run's own record (its runs name the vendor they ran on) for a vendor without one.

``python -m docgen.lab_publish --second-vendor RUN_DIR`` takes a default run made on the other vendor: it writes its
record to ``docs/reference/lab-second-vendor-runs.json`` and, between ``<!-- lab:vendors:start -->`` and
``<!-- lab:vendors:end -->`` of docs/reference/lab-results.md, every difference the readings draw
(:data:`arew.lab.compare.READINGS`) on both vendors with its interval and whether the verdicts agree.

A target file without a complete block is an error (so a marker edited away cannot make the
tables drift silently), and so is a run whose ``config.json`` is not the default study, or
not the study's definition in ``arew.lab.studies`` with the lab's defaults
(``--any-config`` publishes it anyway).

Run it from the repository root. It lives outside the ``arew`` package, beside the other doc writers, because it
writes the repository's own pages and records; the lab itself (``arew lab``, :mod:`arew.lab`) does not import it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from arew.lab.config import LabConfig
from arew.reporting.markdown_blocks import BlockError, has_block, markers, replace_block

REPO = Path(__file__).resolve().parents[1]
TARGETS = (REPO / "docs" / "reference" / "lab-results.md", REPO / "docs" / "guides" / "lab.md")
STUDY_TARGETS = TARGETS[:1]
RUNS_RECORD = REPO / "docs" / "reference" / "lab-default-runs.json"
REPRODUCTION_RECORD = REPO / "docs" / "reference" / "lab-reproduction-runs.json"
SECOND_VENDOR_RECORD = REPO / "docs" / "reference" / "lab-second-vendor-runs.json"
REPRODUCTION_RUN = ("ppo-ir", 0)  # (variant, seed) of the default run that tests/lab/test_reproducibility.py retrains
# columns of the lab guide's summary, by results.md header (the last one by prefix: its target varies)
SUMMARY_COLUMNS = (
    "variant",
    "reward [95% CI]",
    "reward − vanilla [95% CI]",
    "AS proxy",
    "BT proxy",
    "I_AS (nats)",
    "oracle reward",
    "steps to reward",
)


class PublishError(RuntimeError):
    pass


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def summary_table(results_md: str) -> str:
    """The columns of ``SUMMARY_COLUMNS`` from the full table, cells unchanged."""
    lines = [line for line in results_md.splitlines() if line.strip()]
    if len(lines) < 2:
        raise PublishError("results.md has no table")
    header = _cells(lines[0])
    picks = []
    for name in SUMMARY_COLUMNS:
        matches = [i for i, h in enumerate(header) if h == name or (name == "steps to reward" and h.startswith(name))]
        if len(matches) != 1:
            raise PublishError(f"results.md: column {name!r} not found once in {header}")
        picks.append(matches[0])
    rows = [_cells(line) for line in lines[2:]]
    out = ["| " + " | ".join(header[i] for i in picks) + " |", "|" + "---|" * len(picks)]
    out += ["| " + " | ".join(row[i] for i in picks) + " |" for row in rows]
    return "\n".join(out) + "\n"


def blocks_for(results_md: str) -> dict[str, str]:
    """The default run's blocks (:mod:`arew.reporting.markdown_blocks` names) and their contents."""
    return {"lab:default": results_md, "lab:default-summary": summary_table(results_md)}


def publish_text(text: str, blocks: dict[str, str]) -> str:
    """Replace every block of ``blocks`` present in ``text``; at least one must be."""
    present = [name for name in blocks if has_block(text, name)]
    if not present:
        names = ", ".join(markers(name)[0] for name in blocks)
        raise PublishError(f"no lab table markers ({names}) found")
    for name in present:
        text = replace_block(text, name, blocks[name])
    return text


def _differing(ours: dict, expected: dict) -> list[str]:
    expected = json.loads(json.dumps(expected))  # tuples as lists, as config.json holds them
    return sorted(k for k in set(ours) | set(expected) if ours.get(k) != expected.get(k))


def _meta(run: Path) -> dict:
    try:
        return json.loads((run / "config.json").read_text())
    except FileNotFoundError:
        raise PublishError(f"{run} has no config.json (not an `arew lab` output folder)") from None


def check_default(run: Path) -> None:
    differing = _differing(_meta(run)["config"], asdict(LabConfig()))
    if differing:
        raise PublishError(f"{run} is not the default study (differs in {differing}); pass --any-config to publish it")


def study_of(run: Path) -> str | None:
    """The study a run folder holds (None: a plain `arew lab` run)."""
    study = _meta(run).get("study")
    return None if study is None else study["name"]


def check_study(run: Path) -> None:
    """``run`` is its study as ``arew.lab.studies`` defines it, with the lab's default settings."""
    from arew.lab.studies import STUDIES

    meta = _meta(run)
    name = meta["study"]["name"]
    if name not in STUDIES:
        raise PublishError(f"{run}: unknown study {name!r} (known: {', '.join(STUDIES)})")
    study = STUDIES[name]
    differing = _differing(meta["config"], asdict(study.config()))
    differing += [f"study.{k}" for k in _differing(meta["study"], study.to_dict())]
    if differing:
        raise PublishError(
            f"{run} is not the {name!r} study with the lab's defaults (differs in {differing}); "
            "pass --any-config to publish it"
        )


def study_runs(folder: Path) -> list[Path]:
    """``folder`` itself when it is a run, else the study runs inside it (``arew lab --study all``)."""
    if (folder / "config.json").exists():
        return [folder]
    runs = sorted(p for p in folder.iterdir() if (p / "config.json").exists()) if folder.is_dir() else []
    if not runs or any(study_of(p) is None for p in runs):
        raise PublishError(f"{folder} is neither an `arew lab` output folder nor a folder of study folders")
    return runs


def runs_record(run: Path) -> str:
    """The run's config and, per variant and seed, its held-out numbers and arithmetic, as JSON."""
    runs: dict[str, dict[str, dict]] = {}
    for path in sorted((run / "runs").glob("*/seed*.json")):
        payload = json.loads(path.read_text())
        runs.setdefault(payload["variant"], {})[str(payload["seed"])] = {
            "final": payload["final"],
            "arithmetic": payload.get("arithmetic", {}),
        }
    if not runs:
        raise PublishError(f"{run}: no runs/<variant>/seed<k>.json")
    config = json.loads((run / "config.json").read_text())["config"]
    return json.dumps({"config": config, "runs": runs}, indent=1, sort_keys=True) + "\n"


def reproduction_run():
    """:data:`REPRODUCTION_RUN` of the default config trained afresh in the lab's pinned worker process."""
    from tqdm import tqdm

    from arew.lab.config import parse_variant
    from arew.lab.runner import run_all

    config, (variant, seed) = LabConfig(), REPRODUCTION_RUN
    with tqdm(disable=True) as bar:
        (result,) = run_all(1, bar, jobs=[(config, parse_variant(variant), seed)])
    return result


def _reproduction_records() -> dict:
    """docs/reference/lab-reproduction-runs.json: per CPU vendor, the reproduction run recorded on it."""
    return json.loads(REPRODUCTION_RECORD.read_text()) if REPRODUCTION_RECORD.exists() else {}


def reproduction_reference(vendor: str) -> dict:
    """What :data:`REPRODUCTION_RUN` gives on a CPU of ``vendor`` (``final`` and ``arithmetic``): the run recorded on
    that vendor, else the default run's own record."""
    recorded = _reproduction_records()
    if vendor in recorded:
        return recorded[vendor]
    variant, seed = REPRODUCTION_RUN
    return json.loads(RUNS_RECORD.read_text())["runs"][variant][str(seed)]


def record_reproduction() -> Path:
    """Train :data:`REPRODUCTION_RUN` on this machine and record it under this CPU's vendor."""
    result = reproduction_run()
    recorded = _reproduction_records()
    variant, seed = REPRODUCTION_RUN
    recorded[result.arithmetic["cpu_vendor"]] = {"variant": variant, "seed": seed, "final": result.final, "arithmetic": result.arithmetic}
    REPRODUCTION_RECORD.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return REPRODUCTION_RECORD


def publish_second_vendor(run: Path, target: Path | None = None) -> list[Path]:
    """Record a default run made on the other CPU vendor than the published one, and write the table of the
    readings' verdicts on both (:func:`arew.lab.compare.vendor_table`) into ``target`` (default: the results page)."""
    from arew.lab.compare import record_vendor, vendor_table

    check_default(run)
    published, second = json.loads(RUNS_RECORD.read_text()), json.loads(runs_record(run))
    if second["config"] != published["config"]:
        raise PublishError(f"{run} was not run with the published run's config")
    if record_vendor(second) == record_vendor(published):
        raise PublishError(f"{run} ran on {record_vendor(second)}, as the published run did: it needs the other vendor")
    target = target or TARGETS[0]
    try:
        text = publish_text(target.read_text(), {"lab:vendors": vendor_table(published, second)})
    except (PublishError, BlockError) as error:
        raise PublishError(f"{target}: {error}") from None
    SECOND_VENDOR_RECORD.write_text(json.dumps(second, indent=1, sort_keys=True) + "\n")
    target.write_text(text)
    return [SECOND_VENDOR_RECORD, target]


def publish(run: Path, targets: tuple[Path, ...] | None = None, any_config: bool = False) -> list[Path]:
    """Write ``run``'s tables into ``targets`` (default: TARGETS and, for the default run, RUNS_RECORD;
    STUDY_TARGETS for a study); every target is checked before any is written."""
    study = study_of(run)
    if study is not None:
        if not any_config:
            check_study(run)
        blocks = {f"lab:study:{study}": (run / "results.md").read_text()}
        targets = STUDY_TARGETS if targets is None else targets
    else:
        if not any_config:
            check_default(run)
        blocks = blocks_for((run / "results.md").read_text())
    new = {}
    if study is None and targets is None:
        new[RUNS_RECORD] = runs_record(run)
        targets = TARGETS
    for path in targets:
        try:
            new[path] = publish_text(path.read_text(), blocks)
        except (PublishError, BlockError) as error:
            raise PublishError(f"{path}: {error}") from None
    for path, text in new.items():
        path.write_text(text)
    return list(new)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m docgen.lab_publish", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run",
        type=Path,
        nargs="?",
        help="an `arew lab` output folder (results.md, config.json), or an `arew lab --study all` one",
    )
    parser.add_argument(
        "--reproduction",
        action="store_true",
        help="train the run the reproducibility test retrains and record it under this CPU's vendor",
    )
    parser.add_argument(
        "--target",
        type=Path,
        action="append",
        help="target page (repeatable; default: the lab results page and the lab guide; a study: the results page)",
    )
    parser.add_argument("--any-config", action="store_true", help="publish a run that is not the default study")
    parser.add_argument(
        "--second-vendor",
        action="store_true",
        help="RUN is the default run made on the other CPU vendor: record it and write both vendors' verdicts",
    )
    args = parser.parse_args(argv)
    if args.reproduction:
        print(f"recorded {REPRODUCTION_RUN} in {record_reproduction()}")
        return
    if args.run is None:
        parser.error("give a run folder, or --reproduction")
    if args.second_vendor:
        try:
            written = publish_second_vendor(args.run, args.target[0] if args.target else None)
        except PublishError as error:
            raise SystemExit(f"docgen.lab_publish: {error}") from None
        print("published " + ", ".join(str(path) for path in written))
        return
    try:
        runs = study_runs(args.run)
        if not args.any_config:  # every run is checked before any is written
            for run in runs:
                check_study(run) if study_of(run) else check_default(run)
        written = [(run, publish(run, tuple(args.target) if args.target else None, args.any_config)) for run in runs]
    except PublishError as error:
        raise SystemExit(f"docgen.lab_publish: {error}") from None
    for run, paths in written:
        for path in paths:
            print(f"published {run / 'results.md'} into {path}")


if __name__ == "__main__":
    main()
