"""Named plugins that packages declare through an entry-point group, or register in-process.

The tasks (:mod:`arew.envs.registry`, group ``arew.tasks``) and the critique sources
(:mod:`arew.critiques.registry`, group ``arew.critique_sources``) are both kept by a
:class:`PluginRegistry`: an entry point names a sequence of specs (frozen dataclasses with a
``name``), loaded once per process; a broken entry point is logged naming itself and left out, and a
name two packages declare is left out naming both, so the other packages' plugins work; a name registered
over an installed one is refused naming both. Specs name their code as
``"package.module:attribute"`` strings (:func:`load_target`), imported only when used.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import re
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

# plugin names become Hydra group entries, data sources and folder names
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
logger = logging.getLogger("arew")

Spec = TypeVar("Spec")


def load_target(target: str, error: type[Exception], what: str) -> Any:
    """The attribute a ``"package.module:attribute"`` string names; ``error`` beginning with ``what`` when it does not load."""
    module_name, attribute = target.split(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as failure:
        raise error(f"{what} {target!r}: {failure}") from failure


class PluginRegistry(Generic[Spec]):
    """The specs of one kind: those of the installed packages' entry points and those registered in this process.

    One broken package never breaks the others: an entry point that does not load (any exception, ``SystemExit``
    included) or holds something else than specs is logged once, naming it and its distribution, and left out; a
    name two packages declare is left out too, and asking for it says who declared it. Asking for a name nobody
    declared lists the broken entry points beside the known names.
    """

    def __init__(self, group: str, spec_type: type, noun: str, error: type[Exception]):
        self.group, self.spec_type, self.noun, self.error = group, spec_type, noun, error
        self.registered: dict[str, tuple[Spec, str]] = {}
        self.broken: dict[str, str] = {}  # origin -> why it was left out
        self.clashes: dict[str, str] = {}  # name -> the message naming both origins

    def _check(self, specs: Any) -> list[Spec]:
        if isinstance(specs, (str, bytes)) or not isinstance(specs, Iterable):
            raise self.error(f"expected a sequence of {self.spec_type.__name__}, got {type(specs).__name__}")
        specs = list(specs)
        wrong = next((spec for spec in specs if not isinstance(spec, self.spec_type)), None)
        if wrong is not None:
            raise self.error(f"expected {self.spec_type.__name__} entries, got {type(wrong).__name__}")
        return specs

    def _add(self, into: dict[str, tuple[Spec, str]], specs: Iterable[Any], origin: str) -> None:
        try:
            specs = self._check(specs)
        except self.error as failure:
            raise self.error(f"{origin}: {failure}") from None
        for spec in specs:
            if spec.name in into and into[spec.name][1] != origin:
                raise self.error(f"{self.noun} {spec.name!r} is registered twice: by {into[spec.name][1]} and by {origin}")
            into[spec.name] = (spec, origin)

    @functools.cache  # noqa: B019 (one registry object per kind, alive for the process)
    def installed(self) -> dict[str, tuple[Spec, str]]:
        found: dict[str, tuple[Spec, str]] = {}
        self.broken.clear()
        self.clashes.clear()
        for entry in importlib.metadata.entry_points(group=self.group):
            origin = f"entry point {entry.name} = {entry.value!r}" + (f" of {entry.dist.name}" if entry.dist else "")
            try:
                specs = self._check(entry.load())
            except (Exception, SystemExit) as failure:  # a broken plugin names itself instead of breaking every other one
                self.broken[origin] = f"{type(failure).__name__}: {failure}"
                logger.warning("%s left out: %s cannot load it: %s", self.noun, origin, self.broken[origin])
                continue
            for spec in specs:
                if spec.name in self.clashes:
                    self.clashes[spec.name] += f" and by {origin}"
                elif spec.name in found and found[spec.name][1] != origin:
                    self.clashes[spec.name] = f"{self.noun} {spec.name!r} is registered twice: by {found.pop(spec.name)[1]} and by {origin}"
                else:
                    found[spec.name] = (spec, origin)
        for message in self.clashes.values():
            logger.warning("%s; it is left out", message)
        return found

    def register(self, *specs: Spec) -> None:
        """Add specs in this process; a name may not clash with an installed one (registering it again replaces it)."""
        self._add({**self.installed(), **self.registered}, specs, "register()")  # raises on a clash with an installed spec
        self._add(self.registered, specs, "register()")

    def unregister(self, name: str) -> None:
        self.registered.pop(name, None)

    def specs(self) -> dict[str, Spec]:
        return {name: spec for name, (spec, _) in {**self.installed(), **self.registered}.items()}

    def spec(self, name: str) -> Spec:
        specs = self.specs()
        if name in self.clashes and name not in self.registered:
            raise self.error(self.clashes[name])
        if name not in specs:
            broken = "".join(f"; left out, {origin}: {why}" for origin, why in self.broken.items())
            raise KeyError(f"unknown {self.noun} {name!r}; known: {', '.join(specs)}{broken}")
        return specs[name]
