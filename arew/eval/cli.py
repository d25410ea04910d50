"""``arew eval TASK``: evaluate a model on a task's split, from a local folder or any OpenAI-compatible endpoint.

Writes ``<out>/<normal|ablation>/episodes.jsonl`` (one line per episode: reward, numbers, turns
with their critiques), ``results.{md,csv,json}`` next to it, and, when both a normal and a
feedback-ablation run are in ``<out>``, ``<out>/ablation_drop.md``. Rerunning the same command
resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from arew.critiques.settings import CritiquePlan, CritiqueSettings
from arew.envs.registry import check_env_options, describe, prepare_task, task_names, task_spec
from arew.envs.rows import read_rows
from arew.eval.endpoint import EndpointModel
from arew.eval.model import ChatModel
from arew.eval.results import ablation_drop, drop_markdown, summarize, write_tables
from arew.eval.runner import EvalConfig, evaluate, read_episodes
from arew.eval.transcript import TokenCounter
from arew.schema import ConfigError

SYNTHETIC_TEST_ROWS = 300  # arew prepare's default test split
# the training recipe's budget, and the laptop-sized one of the default CPU model (about 2 minutes an episode on 2 cores)
TRAINING_SIZES = {"limit": None, "response_length": 8192, "max_tokens_per_turn": 512, "feedback_reserve_tokens": 256}
DEFAULT_MODEL_SIZES = {"limit": 4, "response_length": 768, "max_tokens_per_turn": 48, "feedback_reserve_tokens": 128}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog, parser.formatter_class = describe(), argparse.RawDescriptionHelpFormatter
    parser.add_argument("task", choices=task_names(), metavar="task", help="a registered task (listed below)")
    parser.add_argument("--model", default=None,
                        help="a Hugging Face model folder or verl checkpoint (default: SmolLM2-135M-Instruct, offline); "
                             "with --endpoint, the served model's name")  # fmt: skip
    parser.add_argument("--endpoint", default=None, help="base URL of an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the endpoint's API key")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder to count an endpoint's tokens (default: 4 characters a token)")
    parser.add_argument("--device", default="auto", help="local model: cpu, cuda, or auto")
    parser.add_argument("--data", default=None, help="a parquet split written by arew prepare (default: the task's --split)")
    parser.add_argument("--split", default="test", choices=("train", "validation", "test"))
    parser.add_argument("--data-dir", default=os.environ.get("AREW_DATA_DIR", "data"), help="where arew prepare wrote the task ($AREW_DATA_DIR)")
    parser.add_argument("--limit", type=int, default=None, help="first N prompts only (default: all; 4 with the default model)")
    parser.add_argument("--n", type=int, default=1, help="episodes per prompt (mean@n, pass@n)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--response-length", type=int, default=None,
                        help="tokens of one episode after its prompt (training's data.max_response_length; default 8192, 768 with the default model)")
    parser.add_argument("--max-tokens-per-turn", type=int, default=None, help="default 512 (48 with the default model)")
    parser.add_argument("--feedback-reserve-tokens", type=int, default=None, help="default 256 (128 with the default model)")
    parser.add_argument("--overflow", default="answer_now", choices=("answer_now", "stop"))
    parser.add_argument("--user", default=None, choices=("offline", "llm"), help="the simulated user (MediQ, FloDial)")
    parser.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment option, as arew_agent.env_options (repeatable; values parsed as YAML)")  # fmt: skip
    parser.add_argument("--feedback-ablation", action="store_true", help="every user answer becomes Unknown (Observation 3)")
    parser.add_argument("--critique-source", default=None, metavar="NAME",
                        help="also critique every decision with this source (judge, simulated, contracts, a package's): the transcripts "
                             "carry its labels beside the rules' and the table their agreement per channel")  # fmt: skip
    parser.add_argument("--critique-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the critique source (YAML value; e.g. url=http://judge:8000/v1, model=...); repeatable")  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight")
    parser.add_argument("--episode-timeout", type=float, default=1800.0, help="seconds per episode (then it fails)")
    parser.add_argument("--retry-failed", action="store_true", help="replay the failed episodes of an earlier run")
    parser.add_argument("--success", type=float, default=1.0, help="reward that counts as solved, for pass@n")
    parser.add_argument("--out", default=None, help="output folder (default runs/eval/<task>/<model>)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def key_values(items: list[str], flag: str) -> dict[str, Any]:
    """A repeatable ``KEY=VALUE`` option's mapping, each value read as YAML; a malformed item names ``flag``."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {item!r}")
        options[key] = yaml.safe_load(value)
    return options


def env_options(args: argparse.Namespace) -> dict[str, Any]:
    options = key_values(args.env_option, "--env-option")
    if args.user:
        options["user"] = args.user
    if args.feedback_ablation:
        options["feedback_ablation"] = True
    check_env_options(args.task, options, prefix="--env-option")
    return options


def critique_plan(args: argparse.Namespace) -> CritiquePlan | None:
    """The critique source's plan for the task (None without ``--critique-source``), checked before any episode."""
    if args.critique_source is None:
        if args.critique_option:
            raise ValueError("--critique-option needs --critique-source")
        return None
    options = key_values(args.critique_option, "--critique-option")
    try:
        return CritiqueSettings(source=args.critique_source, options=options).for_task(args.task, prefix="--critique")
    except ConfigError as error:  # the config section's key paths, as this command's options
        raise ValueError(str(error).replace("--critique.options.", "--critique-option ").replace("--critique.source", "--critique-source")) from None


def load_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows to evaluate: ``--data``, or the task's split, prepared on the fly for synthetic tasks."""
    path = Path(args.data) if args.data else Path(args.data_dir) / args.task / f"{args.split}.parquet"
    if not path.exists():
        if args.data or task_spec(args.task).source == "required":
            raise FileNotFoundError(f"no data at {path}; write it with: arew prepare {args.task} --out {path.parent} --source ...")
        prepare_task(args.task, path.parent, n_train=1, n_val=1, n_test=SYNTHETIC_TEST_ROWS, seed=0)
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit: the number of prompts to play, at least 1, got {args.limit}")
    rows = read_rows(path)
    if not rows:
        raise ValueError(f"{path} has no rows")
    unreadable = next((i for i, row in enumerate(rows) if not isinstance(row.get("extra_info"), dict)), None)
    if unreadable is not None:
        raise ValueError(f"{path} row {unreadable} has no extra_info record (write the data with arew prepare {args.task})")
    return rows[: args.limit] if args.limit is not None else rows


def build_model(args: argparse.Namespace) -> tuple[ChatModel, Any]:
    """The model and its token counter (exact with a tokenizer, else an estimate)."""
    if args.endpoint:
        if not args.model:
            raise ValueError("--endpoint needs --model, the served model's name")
        model = EndpointModel.from_options(url=args.endpoint, model=args.model, api_key_env=args.api_key_env,
                                           concurrency=args.concurrency)  # fmt: skip
        if not args.tokenizer:
            return model, TokenCounter()
        from transformers import AutoTokenizer

        return model, TokenCounter.of_tokenizer(AutoTokenizer.from_pretrained(args.tokenizer))
    from arew.eval.default_model import default_model_folder
    from arew.eval.local import LocalModel

    model = LocalModel(args.model or default_model_folder(), device=args.device)
    return model, TokenCounter.of_tokenizer(model.tokenizer)


def _label(model: ChatModel) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(model.name)).name or "model")


def fill_sizes(args: argparse.Namespace) -> None:
    """Unset sizes take the training recipe's values, or the laptop-sized ones when the default model runs."""
    sizes = DEFAULT_MODEL_SIZES if args.model is None and args.endpoint is None else TRAINING_SIZES
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


ABLATION_DROP_KEY = "eval/feedback_ablation_drop"


def write_drop_metrics(path: Path, drop: dict) -> None:
    """The reward drop as one line of verl's file-logger format, so ``arew report <out>`` draws the dashboard's panel."""
    reward = drop.get("reward")
    if reward is None:
        return
    data = {ABLATION_DROP_KEY: reward["drop"], "eval/reward": reward["normal"], "eval/reward_ablated": reward["ablated"]}
    path.write_text(json.dumps({"step": 0, "data": data}) + "\n")


def main(args: argparse.Namespace) -> None:
    fill_sizes(args)
    try:
        options = env_options(args)
        config = EvalConfig(
            n=args.n, temperature=args.temperature, top_p=args.top_p, seed=args.seed, response_length=args.response_length,
            max_tokens_per_turn=args.max_tokens_per_turn, feedback_reserve_tokens=args.feedback_reserve_tokens,
            overflow=args.overflow, env_options=options, concurrency=args.concurrency, episode_timeout=args.episode_timeout,
            retry_failed=args.retry_failed, critiques=critique_plan(args),
        )  # fmt: skip
        rows = load_rows(args)
        model, tokens = build_model(args)
    except (ValueError, KeyError, FileNotFoundError, ImportError) as error:  # bad input: say what to change
        raise SystemExit(f"arew eval {args.task}: {error}") from None
    out = Path(args.out) if args.out else Path("runs") / "eval" / args.task / _label(model)
    variant = "ablation" if args.feedback_ablation else "normal"
    folder = out / variant
    total = len(rows) * config.n
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        progress = tqdm(total=total, initial=min(total, len(read_episodes(folder))), desc=f"{args.task} {variant}", file=sys.stderr)
    records = asyncio.run(evaluate(model, rows, config, folder, tokens, on_episode=progress and (lambda _: progress.update())))
    if progress:
        progress.close()
    summary = summarize(records, success=args.success)
    summary["config"] = {"task": args.task, "model": str(model.name), "variant": variant, **{k: v for k, v in vars(args).items() if k != "func"}}
    if isinstance(model, EndpointModel):  # this run's requests, retries and failures by kind
        summary["endpoint"] = model.stats.as_dict()
    paths = write_tables(summary, folder, f"{args.task}, {model.name}, {variant}")
    print(paths["md"].read_text())
    other = out / ("normal" if args.feedback_ablation else "ablation") / "results.json"
    if other.exists():
        earlier = json.loads(other.read_text())
        normal, ablated = (earlier, summary) if args.feedback_ablation else (summary, earlier)
        drop = ablation_drop(normal, ablated)
        text = drop_markdown(drop)
        (out / "ablation_drop.md").write_text(text)
        write_drop_metrics(out / "metrics.jsonl", drop)
        print(text)
    print(f"episodes: {folder / 'episodes.jsonl'}\ntables:   {paths['md']}, {paths['csv']}, {paths['json']}")
