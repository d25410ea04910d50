"""The task registry: installed entry points, in-process registration, and the errors that name the culprit."""

import importlib.metadata

import pytest

from arew.envs import registry
from arew.envs.registry import TaskRegistryError, TaskSpec
from arew.envs.rows import read_rows, write_splits

BUILT_IN = ("pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8", "mediq", "flodial-easy", "flodial-hard", "tau2-solo", "tau2-dual")


@pytest.fixture
def installed(monkeypatch):
    """Replace the installed entry points by the given ones (the registry's cache is cleared around it)."""

    def install(*entries: tuple[str, str]) -> None:
        points = [importlib.metadata.EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in entries]
        monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: points if group == registry.ENTRY_POINT_GROUP else [])
        registry.TASKS.installed.cache_clear()

    yield install
    registry.TASKS.installed.cache_clear()


@pytest.fixture
def in_process():
    added = []

    def add(*specs: TaskSpec) -> None:
        registry.register(*specs)
        added.extend(spec.name for spec in specs)

    yield add
    for name in added:
        registry.unregister(name)


# module-level: specs name them as "module:attribute" targets
NOT_AN_ENV = object
CALLS = []


def record(task, out_dir, **sizes):
    CALLS.append((task, out_dir, sizes))
    return {"train": out_dir / "train.parquet"}


def test_the_built_in_tasks_come_from_this_package_s_entry_points():
    assert set(BUILT_IN) <= set(registry.task_names())
    groups = {entry.value for entry in importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert {"arew_preference:TASK_SPECS", "arew_tau2:TASK_SPECS"} <= groups
    assert registry.env_class("pe-g-s2").__name__ == "PreferenceEnv"


def test_listing_the_tasks_leaves_tau2_unimported():
    import subprocess
    import sys

    code = (
        "import sys; from arew.envs import registry; registry.task_names(); registry.describe();"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'tau2' or m.startswith('arew_tau2.'));"
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_task_registered_in_process_is_prepared_and_built(in_process, tmp_path):
    in_process(TaskSpec("pe-copy", env="arew_preference.env:PreferenceEnv", prepare=f"{__name__}:record", description="d"))
    assert "pe-copy" in registry.task_names() and "  pe-copy: d" in registry.describe()
    assert registry.prepare_task("pe-copy", tmp_path, 3, 2, 1, seed=7) == {"train": tmp_path / "train.parquet"}
    assert CALLS[-1] == ("pe-copy", tmp_path, {"n_train": 3, "n_val": 2, "n_test": 1, "seed": 7, "source": None})
    assert registry.env_class("pe-copy").__name__ == "PreferenceEnv"
    with pytest.raises(ValueError, match="row belongs to task 'pe-g-s2', not 'pe-copy'"):
        registry.make_env("pe-copy", {"task": "pe-g-s2"}, 0)


def test_names_clashing_with_an_installed_task_are_refused(in_process):
    spec = TaskSpec("mediq", env="arew_mediq.env:MediQEnv", prepare="arew_mediq.data:prepare", description="d")
    with pytest.raises(TaskRegistryError, match="'mediq' is registered twice: by entry point mediq"):
        in_process(spec)
    assert "mediq" not in registry.TASKS.registered


def test_two_packages_claiming_one_name_are_both_named_and_the_others_work(installed, caplog):
    installed(("first", "arew_mediq:TASK_SPECS"), ("second", "arew_mediq:TASK_SPECS"), ("pe", "arew_preference:TASK_SPECS"))
    with caplog.at_level("WARNING", logger="arew"):
        names = registry.task_names()
    assert "mediq" not in names and "pe-g-s2" in names
    assert "'mediq' is registered twice: by entry point first" in caplog.text
    with pytest.raises(TaskRegistryError, match="'mediq' is registered twice: by entry point first .* and by entry point second"):
        registry.task_spec("mediq")


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("no_such_package.tasks:TASK_SPECS", "ModuleNotFoundError: No module named 'no_such_package'"),
        ("arew_mediq:TASK", "expected a sequence of TaskSpec, got str"),  # a string, not a sequence of TaskSpec
        (f"{__name__}:EXITS", "SystemExit"),
    ],
)
def test_a_broken_plugin_is_named_once_and_left_out_while_the_others_work(installed, caplog, target, reason):
    installed(("broken", target), ("pe", "arew_preference:TASK_SPECS"))
    with caplog.at_level("WARNING", logger="arew"):
        assert "pe-g-s2" in registry.task_names() and "pe-g-s2" in registry.describe()
    assert caplog.text.count("entry point broken") == 1 and reason in caplog.text
    with pytest.raises(KeyError, match=f"unknown task 'ghost'.*left out, entry point broken = '{target}'"):
        registry.task_spec("ghost")


def __getattr__(name):
    if name == "EXITS":  # a plugin whose import ends the process, as a careless package may
        raise SystemExit("a plugin's own exit")
    raise AttributeError(name)



@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Bad Name"}, "task name 'Bad Name'"),
        ({"name": ""}, "task name ''"),
        ({"env": "module.without.attribute"}, "env='module.without.attribute' is not 'package.module:attribute'"),
        ({"prepare": "a:b:c"}, "prepare='a:b:c'"),
        ({"source": "sometimes"}, "source='sometimes'"),
        ({"source": "required"}, "says what it is in source_help"),
    ],
)
def test_a_malformed_spec_fails_when_declared(fields, message):
    spec = {"name": "ok", "env": "a.b:C", "prepare": "a.b:f", "description": "d", **fields}
    with pytest.raises(TaskRegistryError, match=message):
        TaskSpec(**spec)


def test_targets_that_do_not_load_or_are_not_environments_name_the_task(in_process, tmp_path):
    in_process(
        TaskSpec("ghost", env="no_such_module:Env", prepare="no_such_module:prepare", description="d"),
        TaskSpec("not-env", env=f"{__name__}:NOT_AN_ENV", prepare="arew_preference.data:prepare", description="d"),
    )
    with pytest.raises(TaskRegistryError, match="task 'ghost': cannot import env 'no_such_module:Env'"):
        registry.make_env("ghost", {}, 0)
    with pytest.raises(TaskRegistryError, match="task 'ghost': cannot import prepare"):
        registry.prepare_task("ghost", tmp_path, 1, 1, 1, 0)
    with pytest.raises(TaskRegistryError, match="task 'not-env': .*NOT_AN_ENV is not an ActiveReasoningEnv subclass"):
        registry.check_env_options("not-env", {})


def test_source_rules_follow_the_spec(tmp_path):
    with pytest.raises(ValueError, match="'pe-g-s2' is synthetic; it takes no --source"):
        registry.prepare_task("pe-g-s2", tmp_path, 1, 1, 1, 0, source="x")
    with pytest.raises(ValueError, match="'mediq' needs --source: a MediQ jsonl file"):
        registry.prepare_task("mediq", tmp_path, 1, 1, 1, 0)
    with pytest.raises(KeyError, match="unknown task 'nope'; known: .*pe-g-s2"):
        registry.prepare_task("nope", tmp_path, 1, 1, 1, 0)


def test_prepared_data_is_reused_only_for_the_request_that_made_it(tmp_path):
    out = tmp_path / "pe"
    sizes = {"n_train": 4, "n_val": 2, "n_test": 2}
    train = registry.prepare_task("pe-g-s2", out, **sizes, seed=0)["train"]
    first = train.stat().st_mtime_ns
    registry.prepare_task("pe-g-s2", out, **sizes, seed=0, reuse=True)
    assert train.stat().st_mtime_ns == first  # the same request: the files as they are
    registry.prepare_task("pe-g-s2", out, **{**sizes, "n_train": 5}, seed=0, reuse=True)
    assert len(read_rows(train)) == 5  # another size: prepared again
    (out / registry.PREPARED).unlink()  # what an interrupted preparation leaves: no record
    again = train.stat().st_mtime_ns
    registry.prepare_task("pe-g-s2", out, **{**sizes, "n_train": 5}, seed=0, reuse=True)
    assert train.stat().st_mtime_ns != again


def test_a_split_that_fails_to_write_leaves_the_earlier_file_whole_and_no_partial_one(tmp_path):
    write_splits({"train": [{"a": 1}], "validation": [{"a": 2}], "test": [{"a": 3}]}, tmp_path)
    with pytest.raises(ValueError):  # pyarrow cannot write an arbitrary object
        write_splits({"train": [{"a": 4}], "validation": [{"a": object()}], "test": [{"a": 5}]}, tmp_path)
    assert read_rows(tmp_path / "validation.parquet") == [{"a": 2}]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["test.parquet", "train.parquet", "validation.parquet"]
