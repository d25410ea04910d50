"""Critique sources by name, registered like tasks.

A package adds a source without a line of AReW changed: it declares a sequence of
:class:`CritiqueSourceSpec` and points an entry point of the ``arew.critique_sources`` group at it::

    [project.entry-points."arew.critique_sources"]
    my_sources = "my_package.critiques:SOURCE_SPECS"

The built-in sources register the same way (AReW's own ``pyproject.toml``); :func:`register`
adds one in-process (a notebook, a test). ``arew_agent.critiques.source`` names one.
"""

from __future__ import annotations

from dataclasses import dataclass

from arew.critiques.base import CritiqueSource
from arew.plugins import NAME, TARGET, PluginRegistry, load_target

ENTRY_POINT_GROUP = "arew.critique_sources"


class SourceRegistryError(ValueError):
    """A critique source declared wrongly, clashing with another, or not loading."""


@dataclass(frozen=True)
class CritiqueSourceSpec:
    """One source: ``source`` is ``"package.module:Class"`` (a :class:`CritiqueSource` subclass), imported on first use."""

    name: str
    source: str
    description: str

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise SourceRegistryError(f"critique source name {self.name!r}: use lower-case letters, digits, '-', '_' or '.'")
        if not TARGET.fullmatch(self.source):
            raise SourceRegistryError(f"critique source {self.name!r}: source={self.source!r} is not 'package.module:Class'")


SOURCES: PluginRegistry[CritiqueSourceSpec] = PluginRegistry(
    ENTRY_POINT_GROUP, CritiqueSourceSpec, "critique source", SourceRegistryError
)


def register(*specs: CritiqueSourceSpec) -> None:
    SOURCES.register(*specs)


def unregister(name: str) -> None:
    SOURCES.unregister(name)


def source_names() -> tuple[str, ...]:
    return tuple(SOURCES.specs())


def source_class(name: str) -> type[CritiqueSource]:
    spec = SOURCES.spec(name)
    loaded = load_target(spec.source, SourceRegistryError, f"critique source {name!r}: cannot import")
    if not (isinstance(loaded, type) and issubclass(loaded, CritiqueSource)):
        raise SourceRegistryError(f"critique source {name!r}: {spec.source} is not a CritiqueSource subclass")
    if not isinstance(getattr(loaded, "CONFIG", None), type):
        raise SourceRegistryError(f"critique source {name!r}: {spec.source} declares no CONFIG section")
    return loaded
