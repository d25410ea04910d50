"""``arew dashboard`` offline: the built W&B objects follow the panel list, the dry run shows all of it,
and a machine without credentials or network gets a message instead of a traceback. The network is
blocked for every test here (a connect raises), so nothing can reach W&B."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest
import requests
import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws

from arew import cli
from arew.reporting import dashboard, panels


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, no credentials: a fresh HOME without ~/.netrc and no API key (tests add what they need)."""

    def refuse(*args, **kwargs):
        raise OSError("network blocked in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def _example(key: str) -> str:
    return key.replace("*", "x1")


def _plots_key(plot, key: str) -> bool:
    if "*" in key:
        return plot.metric_regex is not None and re.fullmatch(plot.metric_regex, _example(key)) is not None
    return key in plot.y


def test_workspace_has_the_sections_in_order_and_every_key_as_a_line_plot_metric():
    workspace = dashboard.build_workspace("me", "proj", "AReW")
    built = workspace.sections
    assert [s.name for s in built] == [s.name for s in panels.SECTIONS] + ["Rollouts"]
    for section, expected in zip(built, panels.SECTIONS):
        assert all(isinstance(p, wr.LinePlot) for p in section.panels)
        assert [p.title for p in section.panels] == [p.title for p in expected.panels]
        for plot, panel in zip(section.panels, expected.panels):
            for key in panel.keys:
                assert _plots_key(plot, key), (panel.title, key)
    assert [p.table_name for p in built[-1].panels] == list(panels.ROLLOUT_TABLES)
    assert workspace.runset_settings.filters == ""  # no --group: every run of the project
    workspace._to_model()  # the W&B view spec converts without the network


def test_a_star_key_regex_matches_what_the_panel_list_matches():
    pattern = "val-core/arew/*/reward/mean@*"
    regex = dashboard.key_regex((pattern,))
    keys = ["val-core/arew/pe-g-s2/reward/mean@1", "val-core/arew/a/b/reward/mean@1", "val-core/arew/pe/reward/mean@1x/y"]
    assert [k for k in keys if re.fullmatch(regex, k)] == panels.matching(pattern, keys) == keys[:1]
    assert re.fullmatch(dashboard.key_regex(("a.b", "c")), "aXb") is None  # plain keys are literal


def test_group_filters_the_workspace_runs():
    workspace = dashboard.build_workspace("me", "proj", "AReW", group="pe-g-s2-as_bt")
    spec = json.dumps(workspace._to_model().model_dump(by_alias=True, exclude_none=True), default=str)
    assert '{"key": {"section": "run", "name": "group"}, "op": "=", "value": "pe-g-s2-as_bt"' in spec


def test_report_has_one_run_set_per_variant_and_the_figure_panels_overlaid():
    variants = dashboard.parse_variants("vanilla=g-van, as-only=g-as ,as+bt=g-asbt")
    report = dashboard.build_report("me", "proj", "AReW: variants", variants)
    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    assert len(grids) == 1  # one grid: every panel draws every run set
    grid = grids[0]
    assert [r.name for r in grid.runsets] == ["vanilla", "as-only", "as+bt"]
    assert [r.filters for r in grid.runsets] == [f"Metric(\"Group\") == '{g}'" for g in ("g-van", "g-as", "g-asbt")]
    assert all(r.groupby == ["group"] and (r.entity, r.project) == ("me", "proj") for r in grid.runsets)
    by_title = {p.title: p for p in panels.panels()}
    assert [p.title for p in grid.panels] == ["Training reward", "AS proxy", "BT proxy", "I_AS (nats)", "C_BT"]
    for plot in grid.panels:
        assert list(by_title[plot.title].keys) == plot.y


def test_dry_run_lists_every_panel_and_run_set(capsys):
    cli.main(["dashboard", "--entity", "me", "--project", "proj", "--variants", "vanilla=v,as+bt=ab", "--dry-run"])
    out = capsys.readouterr().out
    for section in panels.SECTIONS:
        assert f". {section.name}\n" in out
    for panel in panels.panels():
        line = next(line for line in out.splitlines() if line.startswith(f"  - {panel.title} ["))
        assert panel.description in line
        for key in panel.keys:
            assert key in line if "*" not in key else re.fullmatch(line.split("[", 1)[1].split("]:")[0], _example(key))
    for table in panels.ROLLOUT_TABLES:
        assert f"table {table}:" in out
    assert "run set vanilla: Metric(\"Group\") == 'v'" in out and "run set as+bt: Metric(\"Group\") == 'ab'" in out


def _never_saved(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(ws.Workspace, "save", lambda self: calls.append("workspace"))
    monkeypatch.setattr(wr.Report, "save", lambda self, **kw: calls.append("report"))
    return calls


def test_without_credentials_it_stops_before_any_call_and_says_how_to_log_in(monkeypatch):
    calls = _never_saved(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        cli.main(["dashboard", "--entity", "me", "--project", "proj"])
    message = str(stop.value.code)
    assert message.startswith("arew dashboard: no W&B credentials")
    assert "wandb login" in message and "WANDB_API_KEY" in message and "--dry-run" in message
    assert calls == []


def test_an_offline_machine_with_a_key_gets_the_cause_not_a_traceback(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)

    def unreachable(self):
        raise requests.exceptions.ConnectionError("HTTPSConnectionPool(host='api.wandb.ai', port=443): Max retries exceeded\nmore")

    monkeypatch.setattr(ws.Workspace, "save", unreachable)
    with pytest.raises(SystemExit) as stop:
        cli.main(["dashboard", "--entity", "me", "--project", "proj"])
    message = str(stop.value.code)
    assert message.startswith("arew dashboard: could not save the workspace to W&B at api.wandb.ai (ConnectionError: HTTPSConnectionPool")
    assert "more" not in message and "check the network" in message and "me/proj" in message and "wandb login" in message


def test_a_failed_report_save_says_the_workspace_is_saved(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setattr(ws.Workspace, "save", lambda self: self)
    monkeypatch.setattr(ws.Workspace, "url", "https://wandb.example/me/proj?nw=abc")

    def denied(self, **kwargs):
        raise PermissionError("permission denied for me/proj")

    monkeypatch.setattr(wr.Report, "save", denied)
    with pytest.raises(SystemExit) as stop:
        cli.main(["dashboard", "--entity", "me", "--project", "proj"])
    assert str(stop.value.code).startswith(
        "arew dashboard: could not save the report (the workspace is saved: https://wandb.example/me/proj?nw=abc) to W&B"
        " at api.wandb.ai (PermissionError: permission denied for me/proj)"
    )


def test_the_command_exits_non_zero_without_a_traceback(tmp_path):
    """The real command in a fresh process: no credentials, exit status 1, one line on stderr. Any W&B request
    would go to a closed loopback port (WANDB_BASE_URL), so nothing leaves the machine even if the check broke."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), WANDB_BASE_URL="http://127.0.0.1:9", WANDB_MODE="offline")
    done = subprocess.run([sys.executable, "-m", "arew.cli", "dashboard", "--entity", "me", "--project", "proj"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "arew dashboard: no W&B credentials on this machine (no WANDB_API_KEY, no ~/.netrc entry for 127.0.0.1): "
        "run `wandb login` (it writes ~/.netrc) or set WANDB_API_KEY, or preview with --dry-run"
    ]


@pytest.mark.parametrize(
    "text, needle",
    [("vanilla", "'vanilla' is not LABEL=GROUP"), ("a=x,=y", "'=y' is not LABEL=GROUP"), ("a=x,b=", "'b=' is not"),
     ("a=x,a=y", "each label must appear once, ['a'] repeat"), ("a=x,b=x", "each group must appear once, ['x'] repeat")],
)
def test_bad_variants_are_refused_with_the_syntax(text, needle, monkeypatch):
    calls = _never_saved(monkeypatch)
    with pytest.raises(SystemExit) as stop:
        cli.main(["dashboard", "--entity", "me", "--project", "proj", "--variants", text, "--dry-run"])
    message = str(stop.value.code)
    assert message.startswith("arew dashboard: --variants: ") and needle in message
    assert calls == []
