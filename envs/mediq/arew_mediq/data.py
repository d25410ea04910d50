"""MediQ cases from the MediQ jsonl format to verl parquet splits.

Input: one JSON object per line with ``id``, ``question``, ``context`` (list of sentences),
``options`` (``{"A": ..., "B": ..., "C": ..., "D": ...}``), ``answer_idx`` (a letter) and
``facts`` (atomic statements, usually numbered "1. ..."), as in the MediQ release
(``all_dev_good.jsonl``; :data:`OFFICIAL_URL`). ``source`` is a local path or an http(s)
URL (downloaded with the standard library; only for machines with network access).

Choices, fixed here:

- initial information (MediQ's convention: the expert first sees the patient's opening
  complaint): the first context sentence, extended by the next sentences while it has
  fewer than :data:`MIN_INITIAL_WORDS` words; plus the question and the four options;
- facts already stated there are *known*: a fact whose content terms
  (:func:`arew.envs.lexical.terms`) lie at least :data:`KNOWN_FACT_COVERAGE` inside the initial
  information starts as revealed, so "how old are you?" earns nothing;
- a case is kept when it has the four options A-D, a gold letter among them, a question,
  context, and at least :data:`MIN_OPEN_FACTS` facts that are not known;
- where a record also has an ``answer`` text, it must name the option ``answer_idx`` names: the same
  text (case, spacing and a full stop aside), a name :data:`SYNONYMS` gives for it, or a wording that
  shares more content terms with that option than with any other (:func:`answer_agreement`). A text
  that equals another option, is closer to one, ties, or shares no term with any option leaves the case
  out; what is left out, and what was kept on its wording, is logged with the reason and the ids;
- splits: the kept cases are ordered by id and shuffled with ``seed``; test takes the first
  ``n_test``, validation the next ``n_val``, train the next ``n_train`` (fewer, with a
  warning, when the file runs out), so the test set does not depend on the other sizes
  and a case is in one split only.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from arew.envs.lexical import terms
from arew.envs.rows import TaskVariant, verl_rows, write_splits

logger = logging.getLogger(__name__)

TASK = "mediq"
DATA_SOURCE = TaskVariant(TASK).data_source
OPTION_LETTERS = ("A", "B", "C", "D")
MAX_TURNS = 8
MIN_INITIAL_WORDS = 8
KNOWN_FACT_COVERAGE = 0.75
MIN_OPEN_FACTS = 2
OFFICIAL_URL = "https://raw.githubusercontent.com/stellalisy/mediQ/main/data/all_dev_good.jsonl"
SPLITS = ("test", "validation", "train")

_FACT_PREFIX = re.compile(r"^\s*(?:\d+\s*[.)]|[-*\u2022])\s*")


def read_source(source: str | Path) -> list[dict[str, Any]]:
    """Raw records of a MediQ jsonl file or URL (blank lines skipped)."""
    text_source = str(source)
    if text_source.startswith(("http://", "https://")):
        with urllib.request.urlopen(text_source, timeout=60) as response:  # a URL the user gave
            text = response.read().decode("utf-8")
    else:
        text = Path(source).read_text(encoding="utf-8")
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{text_source}: line {number} is not JSON: {exc}") from exc
    return records


def clean_fact(fact: str) -> str:
    return _FACT_PREFIX.sub("", fact).strip()


def initial_information(context: list[str]) -> str:
    parts: list[str] = []
    for sentence in context:
        parts.append(sentence.strip())
        if len(" ".join(parts).split()) >= MIN_INITIAL_WORDS:
            break
    return " ".join(p for p in parts if p)


def known_facts(facts: list[str], initial: str) -> list[int]:
    seen = terms(initial)
    known = []
    for i, fact in enumerate(facts):
        fact_terms = terms(fact)
        if fact_terms and len(fact_terms & seen) / len(fact_terms) >= KNOWN_FACT_COVERAGE:
            known.append(i)
    return known


def normalize_case(record: dict[str, Any]) -> dict[str, Any] | None:
    """The episode fields of one record, or None when the record is unusable."""
    try:
        options = record["options"]
        if not isinstance(options, dict) or set(options) != set(OPTION_LETTERS):
            return None
        answer = str(record["answer_idx"]).strip().upper()
        context = [str(s) for s in record.get("context") or [] if str(s).strip()]
        question = str(record.get("question") or "").strip()
        facts = [clean_fact(str(f)) for f in record.get("facts") or []]
    except (KeyError, TypeError, AttributeError):
        return None
    facts = [f for f in facts if f]
    if answer not in OPTION_LETTERS or not context or not question:
        return None
    initial = initial_information(context)
    known = known_facts(facts, initial)
    if len(facts) - len(known) < MIN_OPEN_FACTS:
        return None
    return {
        "task": TASK,
        "case_id": str(record.get("id", "")),
        "initial_info": initial,
        "question": question,
        "options": [str(options[letter]) for letter in OPTION_LETTERS],
        "answer_idx": OPTION_LETTERS.index(answer),
        "facts": facts,
        "known_fact_ids": known,
        "max_turns": MAX_TURNS,
    }


# other names of one condition, as MedQA-style answer texts and options write them (each to the name the others map to)
SYNONYMS = {
    "henoch-schönlein purpura": "iga vasculitis", "henoch-schonlein purpura": "iga vasculitis",
    "wegener granulomatosis": "granulomatosis with polyangiitis", "wegener's granulomatosis": "granulomatosis with polyangiitis",
    "churg-strauss syndrome": "eosinophilic granulomatosis with polyangiitis",
    "lou gehrig disease": "amyotrophic lateral sclerosis", "als": "amyotrophic lateral sclerosis",
    "pseudotumor cerebri": "idiopathic intracranial hypertension",
    "reiter syndrome": "reactive arthritis", "reiter's syndrome": "reactive arthritis",
    "pick disease": "frontotemporal dementia", "devic disease": "neuromyelitis optica",
    "hyaline membrane disease": "neonatal respiratory distress syndrome",
    "mi": "myocardial infarction", "heart attack": "myocardial infarction",
}  # fmt: skip


def _plain(text: Any) -> str:
    return " ".join(str(text).split()).rstrip(".").casefold()


def _canonical(text: Any) -> str:
    return SYNONYMS.get(_plain(text), _plain(text))


def answer_agreement(record: dict[str, Any]) -> tuple[bool, str | None]:
    """(whether the record's ``answer`` text names the option its ``answer_idx`` names, and how, for the log:
    None for the same text or no text to check)."""
    answer, options = record.get("answer"), record.get("options")
    letter = str(record.get("answer_idx", "")).strip().upper()
    if answer is None or not isinstance(options, dict) or letter not in options:
        return True, None
    if _plain(answer) == _plain(options[letter]):
        return True, None
    if _canonical(answer) == _canonical(options[letter]):
        return True, "a known synonym of"
    others = [other for other in options if other != letter]
    same = next((other for other in others if _canonical(answer) == _canonical(options[other])), None)
    if same is not None:
        return False, f"names option {same}"
    shared = {other: len(terms(str(answer)) & terms(str(value))) for other, value in options.items()}
    rival = max(others, key=lambda other: shared[other])
    if shared[letter] == shared[rival] == 0:
        return False, "shares no word with any option"
    if shared[rival] > shared[letter]:
        return False, f"is closer to option {rival}"
    if shared[rival] == shared[letter]:
        return False, f"shares as many words with option {rival}"
    return True, "another wording of"


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:10]) + (" ..." if len(ids) > 10 else "")


def _order_key(case: dict[str, Any]) -> tuple:
    case_id = case["case_id"]
    return (0, int(case_id), "") if case_id.isdigit() else (1, 0, case_id)


def build_splits(
    records: list[dict[str, Any]], n_train: int, n_val: int, n_test: int, seed: int
) -> dict[str, list[dict[str, Any]]]:
    """``extra_info`` dicts per split (see the module docstring for the rule)."""
    kept, skipped, reworded = [], {}, {}
    for record in records:
        agrees, how = answer_agreement(record) if isinstance(record, dict) else (True, None)
        if agrees:
            kept.append(record)
        if how is not None:
            (reworded if agrees else skipped).setdefault(how, []).append(str(record.get("id")))
    for how, ids in skipped.items():
        logger.warning("MediQ: skipped %d cases whose answer text does not name the option answer_idx names: it %s (ids %s)", len(ids), how, _shown(ids))
    for how, ids in reworded.items():
        logger.info("MediQ: kept %d cases whose answer text is %s the option answer_idx names (ids %s)", len(ids), how, _shown(ids))
    cases = sorted((c for c in map(normalize_case, kept) if c is not None), key=_order_key)
    ids = [c["case_id"] for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError("MediQ records must have distinct ids")
    if n_test + n_val >= len(cases):
        raise ValueError(
            f"only {len(cases)} usable MediQ cases, not more than --n-test {n_test} + --n-val {n_val}; "
            f"pass smaller splits, e.g. --n-test {len(cases) // 5} --n-val {len(cases) // 10}"
        )
    order = np.random.default_rng(seed).permutation(len(cases))
    sizes = {"test": n_test, "validation": n_val, "train": n_train}
    if n_test + n_val + n_train > len(cases):
        sizes["train"] = len(cases) - n_test - n_val
        logger.warning("MediQ: %d usable cases; train gets %d instead of %d", len(cases), sizes["train"], n_train)
    out: dict[str, list[dict[str, Any]]] = {}
    start = 0
    for split in SPLITS:
        chosen = [cases[k] for k in order[start : start + sizes[split]]]
        start += sizes[split]
        out[split] = [
            {
                **case,
                "split": split,
                "index": index,
                "seed": int(np.random.default_rng([seed, index, SPLITS.index(split)]).integers(2**31)),
            }
            for index, case in enumerate(chosen)
        ]
    return out


def build_rows(source: str | Path, n_train: int, n_val: int, n_test: int, seed: int) -> dict[str, list[dict]]:
    """verl rows per split; ``extra_info`` is all :meth:`MediQEnv.from_row` needs."""
    from arew_mediq.env import MediQEnv

    splits = build_splits(read_source(source), n_train, n_val, n_test, seed)
    return verl_rows(splits, MediQEnv, DATA_SOURCE, lambda info: OPTION_LETTERS[info["answer_idx"]])


def prepare(
    task: str, out_dir: str | Path, *, n_train: int, n_val: int, n_test: int, seed: int, source: str | Path
) -> dict[str, Path]:
    """The registry's data preparation: write ``train``, ``validation`` and ``test`` parquet; return their paths."""
    return write_splits(build_rows(source, n_train, n_val, n_test, seed), out_dir)
