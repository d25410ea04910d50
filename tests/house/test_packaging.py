"""What `pip install` puts on a user's path: the `arew` package and its Hydra plugin (no top-level `envs` to collide
with theirs), and each task family as a distribution of its own."""

import importlib.metadata

import hydra_plugins


def test_the_distribution_installs_the_package_and_a_portion_of_hydra_s_plugin_namespace():
    top_level = importlib.metadata.distribution("arew").read_text("top_level.txt")
    assert top_level is not None and sorted(top_level.split()) == ["arew", "hydra_plugins"]
    # a namespace package: other distributions' Hydra plugins (hydra_plugins.*) stay importable beside AReW's
    assert getattr(hydra_plugins, "__file__", None) is None


def test_each_task_package_is_its_own_distribution_registered_through_the_entry_point_and_arew_declares_none():
    tasks = {
        (entry.dist.name, entry.name, entry.value)
        for entry in importlib.metadata.entry_points(group="arew.tasks")
    }
    assert tasks == {
        ("arew-preference", "preference", "arew_preference:TASK_SPECS"),
        ("arew-mediq", "mediq", "arew_mediq:TASK_SPECS"),
        ("arew-flodial", "flodial", "arew_flodial:TASK_SPECS"),
        ("arew-tau2", "tau2", "arew_tau2:TASK_SPECS"),
        ("arew-number-search", "number_search", "arew_number_search:TASK_SPECS"),
    }
    # the core's own dependencies carry none of tau2's (they are arew-tau2's)
    core = {requirement.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip() for requirement in importlib.metadata.requires("arew") if "extra ==" not in requirement}
    assert not core & {"loguru", "deepdiff", "docstring-parser", "python-dotenv", "addict", "toml"}
