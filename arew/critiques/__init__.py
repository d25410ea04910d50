"""Critique sources beyond the environments' hand-written rules, and how their labels meet the rules'.

- :mod:`arew.critiques.base`: what a source sees of an episode (:class:`EpisodeContext`), what it answers
  (:class:`SourceCritique`) and the combinations (replace, fill, agree);
- :mod:`arew.critiques.registry`: sources by name, declared by packages like tasks;
- :mod:`arew.critiques.settings`: the ``arew_agent.critiques`` section and each task's plan;
- the built-in sources: ``judge`` (:mod:`arew.critiques.judge`, an instruction-tuned model behind any
  OpenAI-compatible endpoint) and ``simulated`` (:mod:`arew.critiques.simulated`, a judge of known accuracy
  drawn from the rules, for studies); a task package adds its own the same way, as the tau2 package adds
  ``contracts`` (tau2's interface contracts mined from successful trajectories).

Nothing here imports verl: the agent loop (:mod:`arew.verl_plugin.agent_loop`) and ``arew eval`` run a
task's plan through the episode driver (:func:`arew.episodes.play`).
"""

from __future__ import annotations

from arew.critiques.registry import CritiqueSourceSpec

SOURCE_SPECS = (
    CritiqueSourceSpec("judge", "arew.critiques.judge:JudgeSource", "an instruction-tuned model labels each decision +1/0/-1 with a reason, from any OpenAI-compatible endpoint"),
    CritiqueSourceSpec("simulated", "arew.critiques.simulated:SimulatedJudge", "a judge of known accuracy drawn from the rules' labels (studies of judge quality)"),
)
