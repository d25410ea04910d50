"""``arew``: the project's command line (data preparation, evaluation, the CPU self-locking lab, the CPU smoke run, W&B dashboards)."""

from __future__ import annotations

import argparse
import sys


def _prepare(args: argparse.Namespace) -> None:
    from arew.envs.registry import prepare_task

    try:
        paths = prepare_task(
            args.task, args.out, n_train=args.n_train, n_val=args.n_val, n_test=args.n_test, seed=args.seed, source=args.source
        )
    except (ValueError, KeyError, FileNotFoundError) as error:  # bad input: say what to change, no traceback
        raise SystemExit(f"arew prepare {args.task}: {error}") from None
    for split, path in paths.items():
        print(f"{split}: {path}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arew", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    from arew.envs.registry import describe, task_names

    prepare = commands.add_parser("prepare", help="write verl-format train/validation/test parquet for a task",
                                  epilog=describe(), formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    prepare.add_argument("task", choices=task_names(), metavar="task", help="a registered task (listed below)")
    prepare.add_argument("--out", required=True, help="output folder")
    prepare.add_argument("--n-train", type=int, default=2048, help="training rows (tau2: at most this many of its split)")
    prepare.add_argument("--n-val", type=int, default=128, help="validation rows (tau2: at most)")
    prepare.add_argument("--n-test", type=int, default=300, help="test rows (tau2: at most)")
    prepare.add_argument("--seed", type=int, default=0)
    prepare.add_argument("--source", default=None, help="the task's raw data, for tasks built from a public data set (see each task)")
    prepare.set_defaults(func=_prepare)

    from arew.envs.new_task import add_arguments as add_new_task_arguments
    from arew.envs.new_task import main as new_task_main

    new_task = commands.add_parser("new-task", help="write a working task package to make your own (then pip install -e it)")
    add_new_task_arguments(new_task)
    new_task.set_defaults(func=new_task_main)

    from arew.lab.runner import add_arguments as add_lab_arguments
    from arew.lab.runner import main as lab_main

    lab = commands.add_parser("lab", help="reproduce self-locking and AReW's escape on the CPU (minutes)")
    add_lab_arguments(lab)
    lab.set_defaults(func=lab_main)

    from arew.lab.lm.experiment import add_arguments as add_lm_lab_arguments
    from arew.lab.lm.experiment import main as lm_lab_main

    lm_lab = commands.add_parser("lm-lab", help="self-locking and AReW's escape with a small language model, through verl's main_ppo on the CPU")
    add_lm_lab_arguments(lm_lab)
    lm_lab.set_defaults(func=lm_lab_main)

    from arew.eval.cli import add_arguments as add_eval_arguments
    from arew.eval.cli import main as eval_main

    evaluate = commands.add_parser("eval", help="evaluate a model on a task: a local folder or an OpenAI-compatible endpoint")
    add_eval_arguments(evaluate)
    evaluate.set_defaults(func=eval_main)

    # its options are parsed by smoke_parser(), on the command alone: importing the plugin imports verl (seconds)
    commands.add_parser("smoke", help=SMOKE_HELP, add_help=False).set_defaults(func=None)

    from arew.reporting.dashboard import add_arguments as add_dashboard_arguments
    from arew.reporting.dashboard import main as dashboard_main

    dashboard = commands.add_parser("dashboard", help="create a W&B workspace with the self-locking panels and a report comparing variants")
    add_dashboard_arguments(dashboard)
    dashboard.set_defaults(func=dashboard_main)

    from arew.reporting.report import add_arguments as add_report_arguments
    from arew.reporting.report import main as report_main

    report = commands.add_parser("report", help="one offline HTML page: dashboard charts and a trajectory viewer, from run folders")
    add_report_arguments(report)
    report.set_defaults(func=report_main)
    return parser


SMOKE_HELP = "run verl's real trainer for 2 steps on a tiny model on the CPU (minutes)"


def smoke_parser() -> argparse.ArgumentParser:
    """``arew smoke``'s own options (its module is the verl plugin's, so it is imported for that command only)."""
    from arew.verl_plugin.smoke import add_arguments, main

    parser = argparse.ArgumentParser(prog="arew smoke", description=SMOKE_HELP)
    add_arguments(parser)
    parser.set_defaults(func=main)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "smoke":
        args = smoke_parser().parse_args(argv[argv.index("smoke") + 1 :])
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.func(args)


if __name__ == "__main__":
    main(sys.argv[1:])
