"""A Hydra search-path plugin: every installed task package's ``configs/`` folder joins AReW's configs.

Hydra loads every module under the ``hydra_plugins`` namespace in every Hydra application of the environment;
this one adds nothing unless AReW's own configs (``--config-path pkg://arew.configs``) are on the search path, and
imports no task package (it only locates them), so other applications are untouched and start as fast as before.
With it, ``task=NAME`` resolves for a task whose package ships ``configs/task/NAME.yaml``, the built-in tasks and a
user's alike, in ``verl.trainer.main_ppo``, ``arew smoke`` and the recipes.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from arew.configs import CONFIG_DIR, CONFIG_PATH, task_config_dirs


class AReWTaskConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        on_path = {element.path for element in search_path.get_path()}
        if CONFIG_PATH not in on_path and not any(_is_config_dir(path) for path in on_path):
            return
        for folder in task_config_dirs():
            search_path.append(provider="arew-task", path=f"file://{folder}")


def _is_config_dir(path: str) -> bool:
    location = path.removeprefix("file://")
    return "://" not in location and location.rstrip("/") == str(CONFIG_DIR)
