"""What `pip install` puts on a user's path: the `arew` package and its Hydra plugin (no top-level `envs` to collide with theirs)."""

import importlib.metadata

import hydra_plugins


def test_the_distribution_installs_the_package_and_a_portion_of_hydra_s_plugin_namespace():
    top_level = importlib.metadata.distribution("arew").read_text("top_level.txt")
    assert top_level is not None and sorted(top_level.split()) == ["arew", "hydra_plugins"]
    # a namespace package: other distributions' Hydra plugins (hydra_plugins.*) stay importable beside AReW's
    assert getattr(hydra_plugins, "__file__", None) is None


def test_the_built_in_tasks_are_registered_through_the_distribution_s_entry_points():
    entry_points = importlib.metadata.distribution("arew").entry_points
    tasks = {entry.name: entry.value for entry in entry_points if entry.group == "arew.tasks"}
    assert tasks == {
        "preference": "arew.envs.preference:TASK_SPECS",
        "mediq": "arew.envs.mediq:TASK_SPECS",
        "flodial": "arew.envs.flodial:TASK_SPECS",
        "tau2": "arew.envs.tau2:TASK_SPECS",
    }
