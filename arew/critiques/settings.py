"""The ``arew_agent.critiques`` section: which source critiques each task's decisions, and how its labels meet the rules'.

Two keys and a URL turn on a judge model for every task::

    arew_agent.critiques.source=judge arew_agent.critiques.options.url=http://judge-host:8000/v1

``tasks`` sets a task apart (``{tau2-solo: {source: contracts}}``, ``{mediq: {source: null}}``): the keys an
entry gives replace the top-level ones for that task; an entry naming another source starts from that
source's default options. Everything is checked at start-up (:func:`check_critique_settings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from arew.critiques.base import COMBINE_MODES, MISSING_POLICIES, Combined, CritiqueSource, EpisodeContext, combine
from arew.critiques.registry import source_class
from arew.schema import ConfigError, parse_section, setting

RULES = "rules"  # the environment's own critiques, under this name beside the source's


@dataclass(frozen=True)
class CritiqueSettings:
    """The ``arew_agent.critiques`` section; each key declared (and documented) once, here."""

    DOC: ClassVar[str] = (
        "Critique sources beside the environment's rules (arew.critiques): a judge model behind any endpoint, "
        "tau2's mined interface contracts, a simulated judge of known accuracy, or a package's own"
    )

    source: str | None = setting(
        None, "Critique source that labels every decision (judge | contracts | simulated | a package's); null: the environment's rules only",
        kind=str, nullable=True,
    )  # fmt: skip
    combine: str = setting(
        "replace", "How the source's labels meet the rules': replace | fill (only where the rule gave 0) | agree (kept where both agree, else 0)",
        choices=COMBINE_MODES,
    )  # fmt: skip
    on_missing: str = setting(
        "rule", "A decision the source could not critique (a failed request, an unparseable reply) takes: rule (the rule's label) | zero; counted",
        choices=MISSING_POLICIES,
    )  # fmt: skip
    options: dict[str, Any] = setting({}, "The source's options (e.g. the judge's url, model, mode); docs/reference/configuration.md lists each source's")
    tasks: dict[str, Any] = setting({}, "Per-task overrides {task: {source, combine, on_missing, options}}; unnamed keys keep the values above")

    def for_task(self, task: str, prefix: str = "arew_agent.critiques") -> CritiquePlan | None:
        """The plan for ``task``'s episodes (None: the rules alone); raises :class:`ConfigError` naming the key."""
        chosen = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "tasks"}
        at = prefix
        override = self.tasks.get(task)
        if override is not None:
            at = f"{prefix}.tasks.{task}"
            if not isinstance(override, Mapping) or set(override) - set(chosen):
                raise ConfigError(f"{at}: a mapping of {sorted(chosen)}, got {override!r}")
            if "source" in override and override["source"] != self.source:
                chosen["options"] = {}
            parsed = parse_section(CritiqueSettings, override, at)
            chosen.update({key: getattr(parsed, key) for key in override})
        name = chosen["source"]
        if name is None:
            return None
        if name == RULES:
            raise ConfigError(f"{at}.source: {RULES!r} names the environment's own critiques (use null)")
        try:
            cls = source_class(name)
        except KeyError as error:
            raise ConfigError(f"{at}.source: {error.args[0]}") from None
        why = cls.check_task(task)
        if why is not None:
            raise ConfigError(f"{at}.source: {name!r} cannot critique task {task!r}: {why}")
        config = parse_section(cls.CONFIG, chosen["options"], f"{at}.options")
        return CritiquePlan(name, cls, config, chosen["combine"], chosen["on_missing"])


@dataclass(frozen=True)
class CritiquePlan:
    """How one task's episodes are critiqued: the source, its parsed options, and the combination."""

    name: str
    source: type[CritiqueSource]
    config: Any
    combine: str
    on_missing: str

    async def label(self, episode: EpisodeContext) -> Combined:
        """The episode's training labels, each source's labels, and its counts (``critique_*`` metrics)."""
        source = self.source(self.config, episode.task)
        critiques = list(await source.critique(episode))
        rule = [decision.rule for decision in episode.decisions]
        labels = combine(rule, critiques, self.combine, self.on_missing)
        counts = {
            "decisions": float(len(rule)),
            "missing": float(sum(c.label is None for c in critiques)),
            "cached": float(sum(c.cached for c in critiques)),
            "changed": float(sum(new != old for new, old in zip(labels, rule))),
            **source.stats,
        }
        for channel in ("as", "bt"):  # how often the source agrees with the rules, on the decisions it labelled
            labelled = [(c.label, d.rule) for c, d in zip(critiques, episode.decisions) if d.channel == channel and c.label is not None]
            counts[f"labelled_{channel}"] = float(len(labelled))
            counts[f"agree_{channel}"] = float(sum(label == ruled for label, ruled in labelled))
        by_source = {RULES: rule, self.name: [0 if c.label is None else c.label for c in critiques]}
        return Combined(labels, by_source, [c.reason for c in critiques], counts)


def check_critique_settings(settings: CritiqueSettings, tasks: Iterable[str], prefix: str = "arew_agent.critiques") -> None:
    """At start-up: every task's plan builds (a known source that can critique it, valid options)."""
    unknown = sorted(set(settings.tasks) - set(tasks))
    if unknown:
        raise ConfigError(f"{prefix}.tasks: {unknown} are not tasks of this run ({sorted(set(tasks))})")
    for task in tasks:
        settings.for_task(task, prefix)
