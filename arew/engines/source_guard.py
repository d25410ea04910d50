"""A patch of another project's code checks first that it patches the source it was written for.

Each patching module keeps the sha256 (first 16 hex digits) of the source of every function it
replaces or relies on; :func:`require_source` stops with the installed version named when the
installed source differs, instead of patching code that may have moved on.
"""

from __future__ import annotations

import hashlib
import inspect


def fingerprint(function) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def require_source(function, fingerprints: dict[str, str], installed: str, written_for: str, patcher: str) -> None:
    """Raise unless ``function``'s source matches ``fingerprints[<module>.<qualname>]``.

    ``installed`` and ``written_for`` name the package's versions ("verl 0.9.2", "verl 0.9.1"); ``patcher``
    is the project file that needs updating.
    """
    name = f"{function.__module__}.{function.__qualname__}"
    found, expected = fingerprint(function), fingerprints[name]
    if found != expected:
        raise RuntimeError(
            f"AReW: {installed} has a different {name} than {written_for}, which {patcher} patches or relies on "
            f"(source fingerprint {found}, expected {expected}); {patcher} needs updating for this version"
        )
