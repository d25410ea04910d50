"""FloDial troubleshooting flowcharts: loading and root-to-fault paths.

A flowchart file (FloDial ``knowledge-sources/*.json``) holds ``name``,
``problem_description``, ``nodes`` (id -> ``utterance``, ``label``, ``terminal``) and
``edges`` (id -> ``{"yes": id, "no": id}``; some nodes have one branch only). Non-terminal
nodes are yes/no questions to the user; terminal nodes are the faults (with the advice
that resolves them). The root is the non-terminal node no edge points to (node "1" in the
release; the lowest id wins a tie, and the lowest question id is used when edges loop back
to every question). The path of a fault is the sequence of (question node, answer) from the root to
it; a fault reachable along several routes keeps its shortest (then lexicographically
first) route, and cycles are never followed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANSWERS = ("yes", "no")

Path_ = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Flowchart:
    name: str
    problem: str
    questions: dict[str, str]
    faults: dict[str, str]
    edges: dict[str, dict[str, str]]
    root: str

    def paths(self) -> dict[str, Path_]:
        """Fault id -> its path from the root (faults that cannot be reached are left out)."""
        best: dict[str, Path_] = {}
        stack: list[tuple[str, Path_, frozenset[str]]] = [(self.root, (), frozenset({self.root}))]
        while stack:
            node, path, seen = stack.pop()
            if node in self.faults:
                if node not in best or (len(path), path) < (len(best[node]), best[node]):
                    best[node] = path
                continue
            for answer in ANSWERS:
                target = self.edges.get(node, {}).get(answer)
                if target is not None and target not in seen and (target in self.faults or target in self.questions):
                    stack.append((target, path + ((node, answer),), seen | {target}))
        return dict(sorted(best.items(), key=lambda item: _id_key(item[0])))


def _id_key(node_id: str) -> tuple:
    return (0, int(node_id), "") if node_id.isdigit() else (1, 0, node_id)


def parse_flowchart(raw: dict[str, Any], fallback_name: str = "") -> Flowchart:
    """A :class:`Flowchart` from the JSON object of one file; ``ValueError`` when malformed."""
    if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), dict):
        raise ValueError("not a flowchart: no 'nodes' object")
    questions: dict[str, str] = {}
    faults: dict[str, str] = {}
    for node_id, node in raw["nodes"].items():
        if not isinstance(node, dict):
            continue
        text = " ".join(str(node.get("utterance") or node.get("label") or "").split())
        if not text:
            continue
        (faults if node.get("terminal") else questions)[str(node_id)] = text
    edges: dict[str, dict[str, str]] = {}
    for node_id, branches in (raw.get("edges") or {}).items():
        if isinstance(branches, dict):
            edges[str(node_id)] = {
                str(answer).strip().lower(): str(target)
                for answer, target in branches.items()
                if str(answer).strip().lower() in ANSWERS
            }
    targets = {t for branches in edges.values() for t in branches.values()}
    if not questions:
        raise ValueError("no question nodes")
    roots = sorted((q for q in questions if q not in targets), key=_id_key) or sorted(questions, key=_id_key)
    problem = " ".join(str(raw.get("problem_description") or "").split())
    return Flowchart(
        name=str(raw.get("name") or fallback_name),
        problem=problem,
        questions=questions,
        faults=faults,
        edges=edges,
        root=roots[0],
    )


def load_flowcharts(folder: str | Path) -> list[Flowchart]:
    """Every flowchart in ``folder`` (or in its ``knowledge-sources`` subfolder), by name.

    Files that are not flowcharts (no ``nodes``/``edges``) are skipped; two flowcharts with
    the same name are an error.
    """
    folder = Path(folder)
    if (folder / "knowledge-sources").is_dir():
        folder = folder / "knowledge-sources"
    if not folder.is_dir():
        raise FileNotFoundError(f"no flowchart folder at {folder}")
    charts: dict[str, Flowchart] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            chart = parse_flowchart(raw, fallback_name=path.stem)
        except (ValueError, json.JSONDecodeError):
            continue
        if chart.name in charts:
            raise ValueError(f"two flowcharts are named {chart.name!r}")
        charts[chart.name] = chart
    if not charts:
        raise ValueError(f"no flowchart files in {folder}")
    return [charts[name] for name in sorted(charts)]
