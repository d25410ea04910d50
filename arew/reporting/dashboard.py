"""``arew dashboard``: a W&B workspace with the self-locking panels, and a report comparing variants.

Both are built from ``arew.reporting.panels`` (the same list as the offline report), so a panel
added there shows up here. The workspace has one section per ``panels.SECTIONS`` entry, in the
paper's order, and a last section with the rollout tables. The report overlays the variants
(vanilla / as-only / as+bt, like the paper's Figs. 3-4) on the reward, AS proxy, BT proxy, I_AS and
C_BT panels, one run set per variant.

Runs are selected by their W&B **run group**, not by config: every W&B run has a group (set with
``WANDB_RUN_GROUP`` when the run starts), it is exact and visible in the W&B UI, while a filter on
a nested config key (``algorithm.arew.channels``) depends on how W&B stores nested dicts and
cannot be checked offline. ``--variants`` maps each label to its group; runs sharing a group (seeds)
are drawn as one line with their spread.

Saving needs the network and W&B credentials; without credentials the command stops before any
network call and says how to log in. ``--dry-run`` builds the same objects and prints them.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from arew.metrics.wandb_credentials import HOW_TO_LOG_IN, has_wandb_credentials, wandb_host
from arew.reporting import panels as panel_list

DEFAULT_VARIANTS = "vanilla=vanilla,as-only=as_only,as+bt=as_bt"  # the recipes' variant names, used as groups
REPORT_PANELS = ("Training reward", "AS proxy", "BT proxy", "I_AS (nats)", "C_BT")  # Figs. 3-4, by panel title
ROLLOUTS_SECTION = "Rollouts"


class DashboardError(RuntimeError):
    """Bad input or an unreachable W&B: the message says what to change."""


@dataclass(frozen=True)
class Variant:
    label: str
    group: str


def parse_variants(text: str) -> tuple[Variant, ...]:
    """``LABEL=GROUP,LABEL=GROUP,...`` -> variants, in order; labels and groups unique and non-empty."""
    variants = []
    for item in text.split(","):
        label, sep, group = (part.strip() for part in item.partition("="))
        if not sep or not label or not group:
            raise DashboardError(f"--variants: {item.strip()!r} is not LABEL=GROUP (e.g. --variants {DEFAULT_VARIANTS})")
        variants.append(Variant(label, group))
    for field in ("label", "group"):
        values = [getattr(v, field) for v in variants]
        repeated = sorted({x for x in values if values.count(x) > 1})
        if repeated:
            raise DashboardError(f"--variants: each {field} must appear once, {repeated} repeat")
    return tuple(variants)


def key_regex(keys: tuple[str, ...]) -> str:
    """One regular expression for W&B's ``metric_regex`` matching exactly the keys ``panels.matching`` would."""
    alternatives = ["[^/]+".join(re.escape(part) for part in key.split("*")) for key in keys]
    return "^(" + "|".join(alternatives) + ")$"


def line_plot(panel: panel_list.Panel):
    """The panel as a W&B line plot: its keys as y metrics, or as one regex where a key has a ``*``."""
    import wandb_workspaces.reports.v2 as wr

    if any("*" in key for key in panel.keys):
        return wr.LinePlot(title=panel.title, metric_regex=key_regex(panel.keys))
    return wr.LinePlot(title=panel.title, y=list(panel.keys))


def _group_filter(group: str):
    from wandb_workspaces import expr

    return [expr.Metric("Group") == group]


def build_workspace(entity: str, project: str, name: str, group: str | None = None):
    """The workspace: the panel sections in order, then the rollout tables; only ``group``'s runs if given."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    sections = [ws.Section(name=s.name, panels=[line_plot(p) for p in s.panels], is_open=True) for s in panel_list.SECTIONS]
    tables = [wr.WeavePanelSummaryTable(table_name=key, layout=wr.Layout(w=24, h=12)) for key in panel_list.ROLLOUT_TABLES]
    one_per_row = ws.SectionLayoutSettings(columns=1, rows=2)
    sections.append(ws.Section(name=ROLLOUTS_SECTION, panels=tables, is_open=True, layout_settings=one_per_row))
    runsets = ws.RunsetSettings(filters=_group_filter(group)) if group else ws.RunsetSettings()
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections, runset_settings=runsets)


def report_panels() -> list[panel_list.Panel]:
    by_title = {p.title: p for p in panel_list.panels()}
    return [by_title[title] for title in REPORT_PANELS]


def build_report(entity: str, project: str, title: str, variants: tuple[Variant, ...]):
    """The comparison report: one run set per variant (its group's runs, seeds as one line) and the Figs. 3-4 panels."""
    import wandb_workspaces.reports.v2 as wr

    chosen = report_panels()
    runsets = [wr.Runset(entity=entity, project=project, name=v.label, filters=_group_filter(v.group), groupby=["group"]) for v in variants]
    text = "\n".join(
        [f"Variants: {', '.join(f'**{v.label}** (group `{v.group}`)' for v in variants)}. What to read:", ""]
        + [f"- **{p.title}**: {p.description} {p.reading}" for p in chosen]
    )
    grid = wr.PanelGrid(runsets=runsets, panels=[line_plot(p) for p in chosen])
    description = "Outcome reward and the AS/BT capability proxies across AReW variants (the paper's Figs. 3-4)."
    return wr.Report(entity=entity, project=project, title=title, description=description, blocks=[wr.MarkdownBlock(text=text), grid])


def plotted_keys(plot) -> str:
    """What a built line plot plots, for people: its y keys, or its regex."""
    return plot.metric_regex if plot.metric_regex else ", ".join(plot.y)


def describe(workspace, report) -> str:
    """The built objects as text (``--dry-run``): sections, panels with keys and reading, report run sets."""
    reading = {p.title: p.description for p in panel_list.panels()}
    scope = workspace.runset_settings.filters or "all runs"
    lines = [f"workspace {workspace.name!r} in {workspace.entity}/{workspace.project} ({scope})"]
    for number, section in enumerate(workspace.sections, 1):
        lines.append(f"section {number}. {section.name}")
        for plot in section.panels:
            if hasattr(plot, "table_name"):
                lines.append(f"  - table {plot.table_name}: sampled episodes (prompt, turns, critiques, reward)")
            else:
                lines.append(f"  - {plot.title} [{plotted_keys(plot)}]: {reading.get(plot.title, '')}")
    lines.append(f"report {report.title!r} in {report.entity}/{report.project}")
    grid = report.blocks[-1]
    for runset in grid.runsets:
        lines.append(f"  run set {runset.name}: {runset.filters}")
    for plot in grid.panels:
        lines.append(f"  - {plot.title} [{plotted_keys(plot)}] (one line per run set)")
    return "\n".join(lines)


def save(workspace, report) -> tuple[str, str]:
    """Save both to W&B and return their URLs; any failure becomes a ``DashboardError`` naming the cause."""
    if not has_wandb_credentials():
        raise DashboardError(f"no W&B credentials on this machine (no WANDB_API_KEY, no ~/.netrc entry for {wandb_host()}): "
                             f"{HOW_TO_LOG_IN}, or preview with --dry-run")
    step = "the workspace"
    try:
        workspace.save()
        step = f"the report (the workspace is saved: {workspace.url})"
        report.save()
        return workspace.url, report.url
    except Exception as error:  # the W&B client raises requests, wandb and plain errors alike
        cause = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        raise DashboardError(f"could not save {step} to W&B at {wandb_host()} ({type(error).__name__}: {cause}); check the network "
                             f"and that the API key can write to {workspace.entity}/{workspace.project} "
                             f"({HOW_TO_LOG_IN}; `wandb login --relogin` replaces a stale key)") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entity", required=True, help="W&B entity (user or team) that owns the project")
    parser.add_argument("--project", required=True, help="W&B project the runs log to (verl's trainer.project_name)")
    parser.add_argument("--group", default=None, help="show only this run group in the workspace (default: all runs)")
    parser.add_argument("--name", default="AReW self-locking", help="workspace name; the report is titled '<name>: variants'")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help=f"report run sets as LABEL=GROUP pairs, W&B run groups set with WANDB_RUN_GROUP (default {DEFAULT_VARIANTS})")
    parser.add_argument("--dry-run", action="store_true", help="build everything offline and print it; nothing is sent")


def main(args: argparse.Namespace) -> None:
    try:
        variants = parse_variants(args.variants)
        workspace = build_workspace(args.entity, args.project, args.name, args.group)
        report = build_report(args.entity, args.project, f"{args.name}: variants", variants)
        if args.dry_run:
            print(describe(workspace, report))
            return
        workspace_url, report_url = save(workspace, report)
    except DashboardError as error:
        raise SystemExit(f"arew dashboard: {error}") from None
    print(f"workspace: {workspace_url}")
    print(f"report:    {report_url}")
