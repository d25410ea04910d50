"""``recipes/train.sh --dry-run``: a paper run's layout and configuration checked, and its resources estimated, with no GPU.

A real run of ``recipes/train.sh`` finds a layout that does not work late: after the data are prepared, the
simulated user's server has loaded its model and Ray and verl have started their workers. A dry run takes the
same path up to verl's command line. ``recipes/train.sh`` computes the layout (nodes, training GPUs per node, the
user server's GPUs, batch and mini-batch: that arithmetic lives in the script only) and hands the Hydra overrides
it would give ``verl.trainer.main_ppo`` to this module instead, with what the configuration does not say: where
the user's server runs (``--user-server``), its GPUs when the script starts it, training's
``CUDA_VISIBLE_DEVICES`` and the GPUs of a node. This module

1. composes ``recipe.yaml`` with those overrides, as ``main_ppo`` does, and resolves its interpolations
   (``main_ppo`` does before it starts its workers);
2. runs AReW's start-up checks (:func:`~arew.verl_plugin.trainer.validate_arew_setup`), verl's own
   (``validate_config`` with ``need_reference_policy`` and ``need_critic``, as ``main_ppo`` calls it) and, for the
   Ray user service, the GPU budget the service checks once Ray is up
   (:func:`arew.serving.spec.check_gpu_budget`, against ``AREW_NNODES`` x ``AREW_GPUS_PER_NODE``);
3. prints the layout, the batches, the estimator, what it skipped and the resources the run needs.

It lives beside the trainer because it imports verl, which the ``arew`` package keeps inside ``arew.verl_plugin``.
A failed check exits with status 1 and the check's own message, which names the key.

What a dry run does not read, and how it does without:

- The data: :func:`validate_arew_setup` reads the configured data files that exist (every prompt's length
  against ``data.max_prompt_length``, with the model's tokenizer; the task names in the files, whose environment
  options and critique settings it checks). The dry run hands it the configuration without data files, and
  without ``arew_agent.critiques.tasks`` (per-task critique settings, which must name the data's tasks), and
  checks the environment options and the critique settings for the recipe's task itself.
- The model's files: verl's check of the critic builds its ``HFModelConfig``, which loads the model config and
  tokenizer at ``critic.model.path`` (a download for a hub name such as the default
  ``Qwen/Qwen2.5-7B-Instruct``). The critic's checks are batch arithmetic, so the dry run points
  ``critic.model.path`` at a stand-in folder: a Qwen2 config and the offline tokenizer of
  :mod:`arew.engines.tiny_models`, no weights. verl's checks of the actor and the reference read no model file.
  The model's size comes from :data:`MODEL_PARAMETERS` instead.

The resources are an estimate, for a GPU of :data:`GPU_GIB` GiB, with ``P`` the trained model's parameters,
``G = trainer.nnodes x trainer.n_gpus_per_node`` the training GPUs and ``b`` the bytes per value of a role's
``fsdp_config.model_dtype`` (2 for bf16, 4 for fp32). FSDP shards every state over the G GPUs, and without
offloading (the recipes' setting) keeps it on them through the whole step, rollout included:

- actor ``4 b P / G``: weights, gradients and AdamW's two moments, all in ``model_dtype`` (verl loads the weights in
  it and keeps no other copy). The recipes' actor is bf16: 8 bytes a parameter. In fp32, verl's default and the
  critic's here, 16: the same as mixed precision's bf16 weights and gradients with fp32 master weights and moments.
- reference policy ``b P / G``, weights only, when ``use_kl_loss`` or ``use_kl_in_reward`` (tau2-dual);
- critic ``4 b P / G`` (PPO and turn-level GAE; the value head is negligible);
- vLLM rollout: ``actor_rollout_ref.rollout.gpu_memory_utilization`` of each training GPU, which vLLM reserves for
  its weights (``2 P / tensor_model_parallel_size`` in bf16) and its KV cache;
- the user's server: its bf16 weights, ``2 P_user`` over its GPUs (vLLM reserves ``--gpu-memory-utilization``
  0.9 of each, the rest of it KV cache).

Not counted: activations (gradient checkpointing is on), logits, CUDA and NCCL workspace, fragmentation. The
numbers are rounded to whole GiB; they say whether a layout is near a GPU's memory, not what a profiler would read.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config

from arew.configs import CONFIG_DIR, group_options
from arew.critiques.settings import check_critique_settings
from arew.envs.registry import check_env_options
from arew.serving.spec import SECTION as USER_SERVICE_SECTION
from arew.serving.spec import ServiceSettings, check_gpu_budget, llm_user_options
from arew.verl_plugin.agent_loop import AgentLoopSettings
from arew.verl_plugin.trainer import validate_arew_setup

# parameters of the paper's models (the trained agents, Qwen2.5-14B-Instruct also the simulated users), by the last
# part of the model's path; the memory estimate knows no other model
MODEL_PARAMETERS = {"Qwen2.5-7B-Instruct": 7.62e9, "Qwen2.5-14B-Instruct": 14.77e9, "Llama-3.1-8B-Instruct": 8.03e9}
GPU_GIB = 80  # the GPU the estimate is held against: an 80 GB A100 or H100
GIB = 2**30
DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp32": 4, "float32": 4}
USER_SERVER_MODES = ("none", "script", "ray", "external")
PAPER_TASKS = ("pe-g-s2", "pe-g-s3", "pe-f-d6", "pe-f-d8", "mediq", "flodial-easy", "flodial-hard", "tau2-solo", "tau2-dual")
VALIDATION_FAILURES = (ValueError, AssertionError, HydraException, OmegaConfBaseException)  # every check's way to refuse
FORMULA = (
    "P parameters, G training GPUs, b bytes of the role's fsdp_config.model_dtype; FSDP, no offload: "
    "actor 4 b P / G (weights, gradients, AdamW's 2 moments) + reference b P / G (KL) + critic 4 b P / G (PPO, turn_gae), "
    "plus vLLM's gpu_memory_utilization of the GPU (its bf16 weights 2 P / TP and KV cache); "
    "user server 2 P_user over its GPUs; activations, logits, CUDA/NCCL workspace not counted"
)


@dataclass(frozen=True)
class UserServer:
    """Where ``recipes/train.sh`` puts the simulated user's server; the configuration does not say.

    ``script``: ``launch/user_server.sh`` on ``gpus`` (its ``CUDA_VISIBLE_DEVICES``) of this node; ``ray``: AReW's Ray
    service, on ``arew_user_service.replicas x tensor_parallel_size`` GPUs of the cluster; ``external``: the server at
    ``AREW_USER_URL``, on none of the run's GPUs; ``none``: the task has no simulated LLM user."""

    mode: str
    gpus: str = ""


@dataclass(frozen=True)
class Estimate:
    """The resources of one run: sizes in GiB per GPU (``None``: the model is not in :data:`MODEL_PARAMETERS`)."""

    model: str
    parameters: float | None
    training_gpus: int
    actor: float | None
    reference: float | None
    critic: float | None
    rollout_share: float
    rollout_weights: float | None
    user_model: str | None
    user_gpus: int
    user_weights: float | None

    @property
    def fsdp(self) -> float | None:
        """The FSDP states each training GPU holds through the step."""
        parts = (self.actor, self.reference, self.critic)
        return None if self.parameters is None else sum(part or 0.0 for part in parts)

    @property
    def per_training_gpu(self) -> float | None:
        return None if self.fsdp is None else self.fsdp + self.rollout_share * GPU_GIB


@dataclass
class DryRun:
    """One recipe's composed configuration, where its user server runs, and what checking it found."""

    config: DictConfig
    choices: dict[str, str]
    server: UserServer
    node_gpus: int = 8
    train_visible: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def task(self) -> str:
        return self.choices["task"]

    @property
    def user_gpus(self) -> int:
        """GPUs of the run that serve the simulated user."""
        if self.server.mode == "script":
            return len(self.server.gpus.split(","))
        if self.server.mode == "ray":
            return service_gpus(self.config)
        return 0

    def check(self) -> None:
        """AReW's and verl's start-up checks, without the data files and the model's files (the module docstring says
        why); the Ray service's GPU budget against the nodes. Raises what the failing check raises."""
        checked = copy.deepcopy(self.config)
        OmegaConf.resolve(checked)
        with open_dict(checked):
            checked.data.train_files = []
            checked.data.val_files = []
            checked.arew_agent.critiques.tasks = {}
            if need_critic(checked):
                checked.critic.model.update(path=stand_in_model_folder().name, tokenizer_path=None, hf_config_path=None)
        validate_arew_setup(checked)
        settings = AgentLoopSettings.from_config(self.config.get("arew_agent"))
        check_env_options(self.task, settings.env_options)
        check_critique_settings(settings.critiques, {self.task})
        validate_config(config=checked, use_reference_policy=need_reference_policy(checked), use_critic=need_critic(checked))
        if self.server.mode == "ray":
            trainer = self.config.trainer
            idle = check_gpu_budget(
                trainer.nnodes * trainer.n_gpus_per_node, self.user_gpus, trainer.nnodes * self.node_gpus, "trainer.nnodes * trainer.n_gpus_per_node"
            )
            if idle:
                self.notes.append(idle)

    def estimate(self) -> Estimate:
        model = str(self.config.actor_rollout_ref.model.path)
        parameters = parameters_of(model)
        trainer, ref = self.config.trainer, self.config.actor_rollout_ref.ref
        rollout = self.config.actor_rollout_ref.rollout
        gpus = trainer.nnodes * trainer.n_gpus_per_node

        def sharded(states: int, fsdp_config) -> float | None:
            return None if parameters is None else states * DTYPE_BYTES[fsdp_config.model_dtype] * parameters / gpus / GIB

        user_model = self.user_model()
        user_parameters = parameters_of(user_model) if user_model else None
        return Estimate(
            model=model,
            parameters=parameters,
            training_gpus=gpus,
            actor=sharded(4, self.config.actor_rollout_ref.actor.fsdp_config),
            reference=sharded(1, ref.fsdp_config) if need_reference_policy(self.config) else None,
            critic=sharded(4, self.config.critic.fsdp) if need_critic(self.config) else None,
            rollout_share=float(rollout.gpu_memory_utilization),
            rollout_weights=None if parameters is None else DTYPE_BYTES[rollout.dtype] * parameters / rollout.tensor_model_parallel_size / GIB,
            user_model=user_model,
            user_gpus=self.user_gpus,
            user_weights=None if user_parameters is None else 2 * user_parameters / max(self.user_gpus, 1) / GIB,
        )

    def user_model(self) -> str | None:
        """The model the user's server serves (the Ray service's own setting first, as it picks it), None without a
        simulated LLM user."""
        keys = llm_user_options(self.config.arew_agent.env_options)
        if self.server.mode == "none" or keys is None:
            return None
        service_model = ServiceSettings.from_config(self.config.get(USER_SERVICE_SECTION)).model if self.server.mode == "ray" else None
        return service_model or self.config.arew_agent.env_options.get(keys[1])

    def heading(self) -> list[str]:
        """What the run is: the recipe, its layout, its user's server, batches and estimator."""
        trainer, actor, rollout = self.config.trainer, self.config.actor_rollout_ref.actor, self.config.actor_rollout_ref.rollout
        training = trainer.nnodes * trainer.n_gpus_per_node
        keys = f"trainer.nnodes={trainer.nnodes}, trainer.n_gpus_per_node={trainer.n_gpus_per_node}"
        if self.train_visible:
            keys += f", CUDA_VISIBLE_DEVICES={self.train_visible}"
        layout = f"{trainer.nnodes} node{'s' if trainer.nnodes > 1 else ''} x {trainer.n_gpus_per_node} training GPUs ({keys})"
        if self.server.mode == "ray":
            layout += f" + {count(self.user_gpus, 'user-server GPU')}: {training + self.user_gpus} of the Ray cluster's {trainer.nnodes} x {self.node_gpus}"
        elif self.server.mode == "script":
            layout += f" + {count(self.user_gpus, 'user-server GPU')} = {training + self.user_gpus} GPUs"
        else:
            layout += f" = {training} GPUs"
        batch_size = self.config.data.train_batch_size
        batch = (
            f"data.train_batch_size={batch_size}, actor_rollout_ref.actor.ppo_mini_batch_size={actor.ppo_mini_batch_size}, "
            f"actor_rollout_ref.rollout.n={rollout.n} ({batch_size * rollout.n} episodes a step, "
            f"{count(batch_size // actor.ppo_mini_batch_size, 'mini-batch', 'mini-batches')})"
        )
        algorithm = self.config.algorithm
        estimator = (
            f"algorithm.adv_estimator={algorithm.adv_estimator}, algorithm.arew.channels={algorithm.arew.channels}; "
            f"critic {'on' if need_critic(self.config) else 'off'}, reference policy {'on' if need_reference_policy(self.config) else 'off'}"
        )
        return [
            f"dry run      task={self.task} algo={self.choices['algo']} variant={self.choices['variant']}, checked with no GPU",
            f"layout       {layout}",
            f"user server  {self.describe_user_server()}",
            f"batch        {batch}",
            f"estimator    {estimator}",
        ]

    def describe_user_server(self) -> str:
        model = self.user_model()
        if model is None:
            return f"none (task {self.task} has no simulated LLM user)"
        if self.server.mode == "script":
            return f"{model}, started by launch/user_server.sh on GPU {self.server.gpus} of this node"
        if self.server.mode == "ray":
            settings = ServiceSettings.from_config(self.config.get(USER_SERVICE_SECTION))
            return (
                f"{model}, started by AReW's Ray service ({USER_SERVICE_SECTION}.replicas={settings.replicas} x "
                f"tensor_parallel_size={settings.tensor_parallel_size})"
            )
        url_key, _ = llm_user_options(self.config.arew_agent.env_options)
        return f"{model}, the running server at {self.config.arew_agent.env_options.get(url_key)} (AREW_USER_URL), on none of this run's GPUs"

    def outcome(self) -> list[str]:
        """What the checks found and skipped, and the resources: the rest of the report, once the checks passed."""
        skipped = [
            "preparing the data, downloading the model; starting the user's server, Ray and verl's workers",
            "the data files: prompt lengths against data.max_prompt_length (with the model's tokenizer) and the task "
            f"names in them (the environment options and critique settings were checked for task {self.task})",
            "the model's files: verl's critic checks loaded a stand-in for critic.model.path (a Qwen2 config, an offline "
            "tokenizer); the model's size is the table's"
            if need_critic(self.config)
            else "the model's files: none read (verl's actor and reference checks need none; the model's size is the table's)",
        ]
        if self.server.mode == "ray":
            skipped.append("the Ray cluster: the service's GPU budget was checked against trainer.nnodes x the node's GPUs")
        checks = "AReW's start-up checks (validate_arew_setup), verl's validate_config"
        return [
            f"checks       passed: {checks}" + (", the Ray service's GPU budget" if self.server.mode == "ray" else ""),
            *(f"note         {note}" for note in self.notes),
            *(f"skipped      {line}" for line in skipped),
            *(f"resources    {line}" for line in resource_lines(self.estimate())),
            f"formula      {FORMULA}",
        ]


def count(number: int, thing: str, things: str = "") -> str:
    return f"{number} {thing if number == 1 else things or thing + 's'}"


def resource_lines(estimate: Estimate) -> list[str]:
    """The estimate in words."""
    total = estimate.per_training_gpu
    if total is None:
        lines = [f"no estimate: {estimate.model} is not in the table of the paper's models ({', '.join(MODEL_PARAMETERS)})"]
    else:
        roles = [("actor", estimate.actor), ("reference", estimate.reference), ("critic", estimate.critic)]
        fsdp = " + ".join(f"{role} {gib(size)}" for role, size in roles if size is not None)
        lines = [
            f"estimates in GiB (2^30 bytes), for {estimate.model}: P = {billions(estimate.parameters)} parameters",
            f"per training GPU (G = {estimate.training_gpus}): FSDP {gib(estimate.fsdp)} ({fsdp}); vLLM rollout {estimate.rollout_share:g} x "
            f"{GPU_GIB} = {estimate.rollout_share * GPU_GIB:.0f} (its weights {gib(estimate.rollout_weights)}, the rest KV cache); "
            f"about {gib(total)} of an {GPU_GIB} GiB GPU" + (", more than it holds" if total > GPU_GIB else ""),
        ]
    if estimate.user_model is not None:
        where = count(estimate.user_gpus, "GPU") if estimate.user_gpus else "the server's own GPUs"
        size = "not in the table" if estimate.user_weights is None else f"bf16 weights {gib(estimate.user_weights)} per GPU"
        lines.append(f"user server: {estimate.user_model} ({size}), on {where}")
    return lines


def billions(parameters: float) -> str:
    return f"{parameters / 1e9:.2f}e9"


def gib(value: float | None) -> str:
    """Whole GiB, or ``?`` for a model not in :data:`MODEL_PARAMETERS`."""
    return "?" if value is None else f"{value:.0f}"


def parameters_of(model_path: str) -> float | None:
    return MODEL_PARAMETERS.get(Path(model_path.rstrip("/")).name)


def user_service(config) -> ServiceSettings | None:
    """The user service's settings of a task with a simulated LLM user; None for a task without one."""
    if llm_user_options(config.arew_agent.env_options) is None:
        return None
    return ServiceSettings.from_config(config.get(USER_SERVICE_SECTION))


def service_gpus(config) -> int:
    """The GPUs AReW's Ray service reserves for a task with a simulated LLM user (replicas x tensor parallelism)."""
    service = user_service(config)
    return 0 if service is None else service.gpus


@cache
def stand_in_model_folder() -> tempfile.TemporaryDirectory:
    """What verl's ``HFModelConfig`` loads in place of the model (built once per process, removed at its exit): a Qwen2
    config and the offline chat tokenizer, no weights."""
    from transformers import Qwen2Config

    from arew.engines.tiny_models import build_chat_tokenizer

    folder = tempfile.TemporaryDirectory(prefix="arew-dry-run-model-")
    tokenizer = build_chat_tokenizer()
    tokenizer.save_pretrained(folder.name)
    Qwen2Config(vocab_size=len(tokenizer), architectures=["Qwen2ForCausalLM"]).save_pretrained(folder.name)
    return folder


def compose_recipe(overrides: Sequence[str]) -> tuple[DictConfig, dict[str, str]]:
    """``recipe.yaml`` with the overrides, as ``main_ppo --config-path pkg://arew.configs --config-name recipe`` composes
    it, and the options its groups took (task, algo, variant)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        config = compose("recipe", overrides=list(overrides), return_hydra_config=True)
    choices = {group: str(option) for group, option in config.hydra.runtime.choices.items() if group in ("task", "algo", "variant")}
    with open_dict(config):
        del config["hydra"]
    return config, choices


def default_user_server(config) -> UserServer:
    """Without ``--user-server``: the Ray service when the configuration asks for it, else the server the task's
    environment options point at, if they ask for an LLM user."""
    service = user_service(config)
    if service is None:
        return UserServer("none")
    return UserServer("ray" if service.mode == "ray" else "external")


def resource_table(runs: Sequence[DryRun]) -> str:
    """A Markdown table of the runs' resources (GiB per GPU): the algorithms of a task that need the same share a
    row, and so do the tasks whose rows are the same."""
    algos_of: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for run in runs:
        estimate = run.estimate()
        user = "-" if estimate.user_model is None else f"{Path(estimate.user_model).name}: {gib(estimate.user_weights)} on {count(estimate.user_gpus, 'GPU')}"
        cells = (
            Path(estimate.model).name, f"{estimate.training_gpus} + {estimate.user_gpus}", gib(estimate.actor),
            gib(estimate.reference) if need_reference_policy(run.config) else "-", gib(estimate.critic) if need_critic(run.config) else "-",
            f"{estimate.rollout_share * GPU_GIB:.0f} ({estimate.rollout_share:g})", gib(estimate.per_training_gpu), user,
        )  # fmt: skip
        algos_of.setdefault((run.task, cells), []).append(run.choices["algo"])
    tasks_of: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (task, cells), algos in algos_of.items():
        tasks_of.setdefault((tuple(algos), cells), []).append(task)
    header = [
        "| tasks | algorithms | trained model | GPUs: training + user server | actor | reference | critic | vLLM rollout "
        "(gpu_memory_utilization) | in all, per training GPU | user server: bf16 weights per GPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = (f"| {', '.join(tasks)} | {', '.join(algos)} | {' | '.join(cells)} |" for (algos, cells), tasks in tasks_of.items())
    return "\n".join([*header, *rows])


def table_runs() -> list[DryRun]:
    """Every paper task with every algorithm (variant as_bt: the variants need the same) at the one-node layout the task
    configs carry, which is the one ``recipes/train.sh`` computes for one node; the user's server on
    ``arew_user_service.replicas x tensor_parallel_size`` GPUs (1, as ``launch/user_server.sh`` on GPU 7)."""
    runs = []
    for task in PAPER_TASKS:
        for algo in group_options("algo"):
            config, choices = compose_recipe([f"task={task}", f"algo={algo}", "variant=as_bt"])
            run = DryRun(config, choices, UserServer("ray" if service_gpus(config) else "none"))
            run.check()
            runs.append(run)
    return runs


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m arew.verl_plugin.dry_run",
        description="Compose a recipe as recipes/train.sh would run it, run AReW's and verl's start-up checks without "
        "GPUs, data or the model's files, and print the layout and the resources it needs (recipes/train.sh --dry-run).",
    )
    parser.add_argument("--user-server", choices=USER_SERVER_MODES, default=None,
                        help="where the simulated user's server runs (default: ray if arew_user_service.mode=ray, else "
                             "external where the task has an LLM user, else none)")  # fmt: skip
    parser.add_argument("--user-gpus", default="", help="--user-server script: the server's CUDA_VISIBLE_DEVICES (AREW_USER_GPUS)")
    parser.add_argument("--node-gpus", type=int, default=8, help="GPUs per node (AREW_GPUS_PER_NODE), for the Ray service's budget")
    parser.add_argument("--train-visible", default="", help="training's CUDA_VISIBLE_DEVICES where recipes/train.sh sets it")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as recipes/train.sh passes them to main_ppo")
    return parser.parse_args(argv)


def from_arguments(args: argparse.Namespace) -> DryRun:
    """The run the arguments describe, composed and not yet checked."""
    config, choices = compose_recipe(args.overrides)
    server = UserServer(args.user_server, args.user_gpus) if args.user_server else default_user_server(config)
    return DryRun(config, choices, server, args.node_gpus, args.train_visible)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the run and check it (0), or print why a check refused it (1)."""
    args = parse_arguments(argv)
    try:
        run = from_arguments(args)
        print("\n".join(run.heading()), flush=True)
        run.check()
    except VALIDATION_FAILURES as error:
        print(f"dry run failed: {error}", file=sys.stderr)
        return 1
    print("\n".join(run.outcome()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
