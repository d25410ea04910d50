"""Critique sources: the combinations, the arew_agent.critiques section, the registry, the simulated judge,
and a source relabelling a real episode through the driver."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from arew.critiques import registry
from arew.critiques.base import CritiqueSource, Decision, EpisodeContext, SourceCritique, combine
from arew.critiques.registry import CritiqueSourceSpec, SourceRegistryError
from arew.critiques.settings import RULES, CritiqueSettings, check_critique_settings
from arew.critiques.simulated import SimulatedJudge, SimulatedJudgeConfig, simulated_judge_labels
from arew.envs.registry import make_env
from arew.episodes import EpisodeCritiques, EpisodeLog, play
from arew.schema import ConfigError, parse_section
from arew_preference.data import build_rows
from fakes import ScriptedAgent

RULE = [1, 0, -1, 0, 1]


def critiques(*labels):
    return [SourceCritique(z) for z in labels]


@pytest.mark.parametrize(
    ("mode", "on_missing", "expected"),
    [
        ("replace", "rule", [-1, 1, None, 0, 1]),
        ("replace", "zero", [-1, 1, 0, 0, 1]),
        ("fill", "rule", [1, 1, -1, 0, 1]),
        ("fill", "zero", [1, 1, -1, 0, 1]),
        ("agree", "rule", [0, 0, -1, 0, 1]),
        ("agree", "zero", [0, 0, 0, 0, 1]),
    ],
)
def test_each_combination_of_rule_and_source(mode, on_missing, expected):
    source = critiques(-1, 1, None, 0, 1)
    labels = combine(RULE, source, mode, on_missing)
    assert labels == [RULE[i] if e is None else e for i, e in enumerate(expected)]


def test_combine_refuses_what_does_not_line_up():
    with pytest.raises(ValueError, match="gave 2 critiques for 5 decisions"):
        combine(RULE, critiques(1, 1), "replace", "rule")
    with pytest.raises(ValueError, match="combine: must be one of"):
        combine(RULE, critiques(*RULE), "vote", "rule")
    with pytest.raises(ValueError, match="a critique label is one of"):
        SourceCritique(2)


def settings(**raw) -> CritiqueSettings:
    return parse_section(CritiqueSettings, raw, "arew_agent.critiques")


def test_two_keys_and_a_url_turn_on_the_judge_for_every_task():
    plan = settings(source="judge", options={"url": "http://judge:8000/v1"}).for_task("mediq")
    assert plan.name == "judge" and plan.combine == "replace" and plan.on_missing == "rule"
    assert plan.config.url == "http://judge:8000/v1" and plan.config.mode == "decision"
    assert settings().for_task("mediq") is None  # the rules alone


def test_a_task_set_apart_takes_its_own_source_and_keeps_the_rest():
    section = settings(
        source="judge", combine="fill", options={"url": "http://judge:8000/v1"},
        tasks={"tau2-solo": {"source": "simulated", "options": {"accuracy": 0.7}}, "mediq": {"source": None}, "pe-g-s2": {"combine": "agree"}},
    )  # fmt: skip
    tau2 = section.for_task("tau2-solo")
    assert tau2.name == "simulated" and tau2.config.accuracy == 0.7 and tau2.combine == "fill"
    assert section.for_task("mediq") is None
    pe = section.for_task("pe-g-s2")
    assert pe.name == "judge" and pe.combine == "agree" and pe.config.url == "http://judge:8000/v1"
    # a task whose entry names another source without options starts from that source's defaults
    assert settings(source="judge", options={"url": "http://x:1/v1"}, tasks={"mediq": {"source": "simulated"}}).for_task("mediq").config == SimulatedJudgeConfig()


@pytest.mark.parametrize(
    ("raw", "task", "message"),
    [
        ({"source": "oracle"}, "mediq", r"arew_agent.critiques.source: unknown critique source 'oracle'; known: .*judge"),
        ({"source": "rules"}, "mediq", "names the environment's own critiques"),
        ({"source": "judge", "options": {"mode": "batch"}}, "mediq", r"arew_agent.critiques.options.mode: must be one of"),
        ({"source": "judge", "options": {"url": "judge:8000"}}, "mediq", r"arew_agent.critiques.options.url: must be an http"),
        ({"source": "judge", "options": {"temperture": 0}}, "mediq", r"arew_agent.critiques.options.temperture: unknown key"),
        ({"source": "simulated", "options": {"accuracy": 1.5}}, "mediq", r"options.accuracy: must be >= 0 and <= 1, got 1.5"),
        ({"tasks": {"mediq": {"source": "judge", "lam": 1}}}, "mediq", r"arew_agent.critiques.tasks.mediq: a mapping of"),
        ({"tasks": {"mediq": {"source": "simulated", "options": {"seed": "x"}}}}, "mediq", r"tasks.mediq.options.seed"),
    ],
)
def test_bad_settings_fail_at_start_up_naming_the_key(raw, task, message):
    with pytest.raises(ConfigError, match=message):
        settings(**raw).for_task(task)


def test_start_up_checks_every_task_of_the_run_and_refuses_overrides_for_others():
    check_critique_settings(settings(source="simulated"), ["mediq", "pe-g-s2"])
    with pytest.raises(ConfigError, match=r"arew_agent.critiques.tasks: \['flodial-easy'\] are not tasks of this run"):
        check_critique_settings(settings(tasks={"flodial-easy": {"source": None}}), ["mediq"])
    with pytest.raises(ConfigError, match="combine: must be one of"):
        settings(combine="vote")


class EchoSource(CritiqueSource):
    """A package's source: +1 for every action, -1 for every update, refuses FloDial."""

    CONFIG = SimulatedJudgeConfig

    @classmethod
    def check_task(cls, task):
        return "it reads no flowcharts" if task.startswith("flodial") else None

    async def critique(self, episode):
        self.count("seen", len(episode.decisions))
        return [SourceCritique(1 if d.channel == "as" else -1, "echo") for d in episode.decisions]


NOT_A_SOURCE = object


@pytest.fixture
def in_process():
    added = []

    def add(*specs):
        registry.register(*specs)
        added.extend(spec.name for spec in specs)

    yield add
    for name in added:
        registry.unregister(name)


def test_the_built_in_sources_come_from_this_package_s_entry_point():
    assert {"judge", "contracts", "simulated"} <= set(registry.source_names())
    values = {entry.value for entry in importlib.metadata.entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert "arew.critiques:SOURCE_SPECS" in values


def test_a_package_s_source_registers_like_a_task_and_says_which_tasks_it_cannot_critique(in_process):
    in_process(CritiqueSourceSpec("echo", f"{__name__}:EchoSource", "d"), CritiqueSourceSpec("broken", f"{__name__}:NOT_A_SOURCE", "d"))
    assert settings(source="echo").for_task("mediq").source is EchoSource
    with pytest.raises(ConfigError, match="'echo' cannot critique task 'flodial-easy': it reads no flowcharts"):
        settings(source="echo").for_task("flodial-easy")
    with pytest.raises(SourceRegistryError, match="NOT_A_SOURCE is not a CritiqueSource subclass"):
        settings(source="broken").for_task("mediq")
    with pytest.raises(SourceRegistryError, match="'judge' is registered twice"):
        registry.register(CritiqueSourceSpec("judge", f"{__name__}:EchoSource", "d"))
    with pytest.raises(SourceRegistryError, match="is not 'package.module:Class'"):
        CritiqueSourceSpec("x", "no-colon", "d")


def test_the_simulated_judge_has_the_accuracy_it_is_given_and_errs_as_documented():
    reference = torch.tensor([1, 0, -1] * 20000)
    for accuracy in (1.0, 0.75, 0.5, 0.0):
        labels = simulated_judge_labels(reference, accuracy, torch.Generator().manual_seed(0))
        assert abs(float((labels == reference).double().mean()) - accuracy) < 0.01
        wrong = labels != reference
        assert torch.equal(labels[wrong & (reference != 0)], -reference[wrong & (reference != 0)])  # a sign flips
        if accuracy < 1:
            on_zero = labels[wrong & (reference == 0)]
            assert set(on_zero.tolist()) == {-1, 1} and abs(float((on_zero == 1).double().mean()) - 0.5) < 0.03


async def test_the_simulated_source_labels_an_episode_the_same_way_each_time():
    episode = EpisodeContext("mediq", {}, (), tuple(Decision("t", "as", None, z) for z in [1, -1, 0] * 30), "train:3:0")
    judge = SimulatedJudge(SimulatedJudgeConfig(accuracy=0.6, seed=1), "mediq")
    first, again = await judge.critique(episode), await SimulatedJudge(judge.config, "mediq").critique(episode)
    assert [c.label for c in first] == [c.label for c in again]
    other = await SimulatedJudge(judge.config, "mediq").critique(EpisodeContext("mediq", {}, (), episode.decisions, "train:4:0"))
    assert [c.label for c in first] != [c.label for c in other]


HALF = ", ".join(["0.5"] * 6)
REPEATED_ITEM = ["<interact>1, 1 | 1, 2</interact>", f"<interact>{HALF}</interact>", f"<answer>{HALF}</answer>"]  # AS -1


async def play_pe(log: EpisodeLog, texts, plan=None, with_messages=False) -> dict:
    """A PE-G episode of ``texts`` into ``log``, critiqued by ``plan``'s source when given; returns its row."""
    row = build_rows("pe-g-s2", 2, 1, 1, seed=3)["train"][0]["extra_info"]
    env = make_env(row["task"], row, row["seed"])
    messages = tuple(env.initial_messages()) if with_messages else ()
    critiques = None if plan is None else EpisodeCritiques(plan, row["task"], row, messages, "train:0:0")
    await play(env, ScriptedAgent(texts), log, critiques=critiques)
    return row


async def test_a_source_relabels_a_real_episode_through_the_driver_and_the_log_keeps_both(in_process):
    in_process(CritiqueSourceSpec("echo", f"{__name__}:EchoSource", "d"))
    plain, log = EpisodeLog(), EpisodeLog()
    await play_pe(plain, REPEATED_ITEM)
    await play_pe(log, REPEATED_ITEM, settings(source="echo", combine="replace").for_task("pe-g-s2"), with_messages=True)
    assert log.labels == [1, -1, -1] and log.by_source == {RULES: plain.labels, "echo": [1, -1, -1]}
    assert plain.labels[0] == -1 and log.phase == "environment"
    info = log.info(None, {})
    assert info["critique_decisions"] == 3 and info["critique_changed"] == float(sum(a != b for a, b in zip(plain.labels, [1, -1, -1])))
    assert info["critique_seen"] == 3 and info["as_pos"] == 1  # the counts are the combined labels'


class BrokenSource(CritiqueSource):
    CONFIG = SimulatedJudgeConfig

    async def critique(self, episode):
        raise RuntimeError("a bug in a package's source")


async def test_a_source_that_raises_fails_its_episode_in_phase_critique(in_process):
    """The agent loop turns the raise into a sample that trains nothing, counted under episode/failed/critique."""
    in_process(CritiqueSourceSpec("broken-source", f"{__name__}:BrokenSource", "d"))
    log = EpisodeLog()
    with pytest.raises(RuntimeError, match="a bug in a package's source"):
        await play_pe(log, [f"<answer>{HALF}</answer>"], settings(source="broken-source").for_task("pe-g-s2"))
    assert log.phase == "critique"


async def test_the_rollout_rows_show_each_sources_label_and_the_reason_per_turn(in_process):
    from arew.metrics.rollouts import build_row, transcript, transcript_text

    in_process(CritiqueSourceSpec("echo", f"{__name__}:EchoSource", "d"))
    log = EpisodeLog()
    row = await play_pe(log, REPEATED_ITEM, settings(source="echo", combine="fill").for_task("pe-g-s2"))
    stored = transcript(log.turns(), "prompt", row["task"], "arew/pe-g-s2", 4000)
    built = build_row("train", 1, "n", 0.0, stored, {}, None)
    assert [t["sources"] for t in built["turns"]] == [{"rules": r, "echo": e} for r, e in zip(log.by_source["rules"], [1, -1, -1])]
    assert [t["reason"] for t in built["turns"]] == ["echo"] * 3 and [t["critique"] for t in built["turns"]] == log.labels
    assert "critiques: rules -1 echo +1 (echo)" in transcript_text(built)
