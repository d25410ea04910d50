"""AReW's Hydra configs, shipped inside the package as verl ships its own (``pkg://verl.trainer.config``).

``recipe.yaml`` (the paper's runs: ``task``, ``algo``, ``variant`` and ``backend`` groups) and ``arew_trainer.yaml``
(verl's trainer with AReW's defaults) are primary configs: ``--config-path pkg://arew.configs``.
``base/arew.yaml`` holds every AReW key's default. Each installed task package's own ``configs/`` folder joins
the search path whenever these configs are on it (:mod:`hydra_plugins.arew_task_configs`).
"""

import importlib.metadata
import importlib.util
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
# what Hydra's --config-path takes (verl.trainer.main_ppo's and arew smoke's command line, the recipes)
CONFIG_PATH = "pkg://arew.configs"
# a CPU rollout engine -> its config of the backend group (``backend/cpu.yaml``: the hf sampler; ``cpu_vllm``: vLLM's CPU build)
CPU_ROLLOUT_BACKENDS = {"hf": "cpu", "vllm": "cpu_vllm"}


def group_options(group: str) -> tuple[str, ...]:
    """The options of one of the recipe's config groups (``algo``, ``variant``, ``backend``), by file name."""
    return tuple(sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml")))


def task_config_dirs() -> list[Path]:
    """The ``configs/`` folder of every installed task package (``arew.tasks`` entry points), located without
    importing the package: Hydra's search-path plugin calls this in each run's start-up."""
    folders = []
    for entry_point in importlib.metadata.entry_points(group="arew.tasks"):
        module = entry_point.value.split(":")[0]
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue  # a broken task package: the task registry names it when a task is looked up
        locations = spec.submodule_search_locations if spec else None
        folder = Path(locations[0]) / "configs" if locations else None
        if folder is not None and folder.is_dir() and folder.resolve() != CONFIG_DIR and folder not in folders:
            folders.append(folder)
    return folders
