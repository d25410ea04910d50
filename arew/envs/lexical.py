"""Deterministic lexical matching: the "understanding" of the offline simulated users.

Text becomes a set of *terms*: lower-case ASCII words (letters and digits, split at any
other character), minus a stop list of function words and question words, reduced by a
small suffix stripper so that "urinating", "urination" and "urinated" meet (with overrides
where stripping would merge words of other meanings: "fever" and "FEV", "counter" and
"count"), and extended by a short table of concept words and phrases (a question about
"vitals" reaches facts that mention temperature, pulse or blood pressure). The table names
no stand-in that is often something else ("rate", "pressure", "visited", "returned"): a
concept hit turns an unrelated question into a reveal. Scores weight each term by a
BM25-style inverse document frequency over the passages being searched, so that words every
passage shares count little; a query term that no passage contains weighs as a term of zero
passages (coverage: it counts fully against a match) or of one passage (similarity: a softer
penalty, since paraphrases of a short table row bring words of their own).

Two scores are used:

- :func:`coverage_scores`: the share of the *query's* term weight that a passage contains.
  A phrase of the table ("blood pressure", "heart rate") is one term there and matches only
  its words in sequence, so "What is your blood pressure?" does not reach "The lesion
  blanches with pressure". The patient of MediQ reveals a fact when it covers enough of the
  question.
- :func:`similarity_scores`: an idf-weighted cosine of term sets, taken as the best over a
  passage's sentences and the whole passage. The FloDial user maps a question to a table
  row with it, since both sides are questions of similar length.

Every function accepts any string (length is capped at :data:`MAX_CHARS`) and never raises
on odd text; this module reads the agent's question only after :mod:`arew.envs.parsing` has
accepted it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MAX_CHARS = 4000

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any anything are aren as at be because been
    before being below between both but by can cannot could did didn do does doesn doing don done down
    during each else ever few for from further get got had hasn has have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just know let like me might more most
    much must my myself no nor not now of off on once only or other our ours ourselves out over own
    please same she should so some such tell than that the their theirs them themselves then there these
    they this those through to too try tried trying under until up very was wasn we were weren what whatever when where
    whether which while who whom whose why will with won would yes you your yours yourself yourselves
    patient patients anyone someone something currently recent recently lately ever describe experience experiencing
    noticed notice kind sort type feel feeling feels happen happened happening thing things one
    sign signs symptom symptoms problem problems issue issues
    """.split()
)

_SUFFIXES = (
    "ational", "ations", "ation", "ating", "ated", "ates", "ate", "ings", "ing", "ies", "ied",
    "ness", "ment", "ers", "er", "ed", "es", "ly", "s", "e",
)  # fmt: skip
MIN_STEM = 3
# words whose stripped form means something else ("fever" -> "fev", as FEV; "pulsating" ->
# "pul", as pulse; "older" brother -> "old"; peripheral "pulses" are an exam, not the pulse rate)
_STEM_OVERRIDES = {
    "fever": "fever", "fevers": "fever", "counter": "counter", "counters": "counter",
    "testes": "testis", "wine": "wine", "wines": "wine", "older": "older", "pulses": "pulses",
    "pulsating": "pulsat", "pulsation": "pulsat", "pulsations": "pulsat", "pulsatile": "pulsat",
}  # fmt: skip

_RELATIVES = ("mother", "father", "sister", "brother", "parent", "sibling")
# concept word or phrase -> words and phrases it also stands for; all stemmed at import
_CONCEPT_WORDS: dict[str, tuple[str, ...]] = {
    "old": ("age", "aged"),
    "age": ("old",),
    "gender": ("male", "female", "man", "woman", "boy", "girl", "sex"),
    "sex": ("male", "female", "man", "woman", "boy", "girl", "sexual", "sexually"),
    "vitals": ("temperature", "pulse", "blood pressure", "heart rate", "respiratory rate", "oxygen saturation"),
    "temperature": ("fever", "febrile"),
    "fever": ("temperature", "febrile"),
    "blood pressure": ("bp", "hypertension", "hypotension"),
    "heart rate": ("pulse", "tachycardia", "bradycardia"),
    "pulse": ("heart rate", "pulses"),
    "medication": ("medicine", "drug", "taking", "therapy"),
    "medicine": ("medication", "drug", "taking"),
    "drug": ("medication", "medicine", "taking"),
    "smoking": ("cigarette", "tobacco", "pack year"),
    "alcohol": ("drink", "drinks", "beer", "wine"),
    "drink": ("alcohol", "beer", "wine"),
    "family": _RELATIVES,
    "family history": _RELATIVES,
    "lab": ("level", "count", "serum", "concentration", "laboratory"),
    "labs": ("level", "count", "serum", "concentration", "laboratory"),
    "laboratory": ("level", "count", "serum", "concentration", "lab"),
    "test": ("level", "count", "serum", "laboratory", "lab"),
    "allergy": ("allergic", "allergies"),
    "surgery": ("surgical", "operation", "underwent", "surgeries"),
    "travel": ("trip", "abroad", "vacation", "traveled"),
    "trip": ("travel", "abroad", "vacation"),
    "abroad": ("travel", "trip", "vacation"),
    "exam": ("examination",),
    "urine": ("urinary", "urination", "voiding", "micturition"),
    "breathing": ("dyspnea", "breathless", "breath"),
}


def stem(word: str) -> str:
    """Strip the first listed matching suffix, twice at most, keeping :data:`MIN_STEM` letters
    (words of :data:`_STEM_OVERRIDES` take their listed stem)."""
    if word in _STEM_OVERRIDES:
        return _STEM_OVERRIDES[word]
    for _ in range(2):
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
                word = word[: -len(suffix)]
                break
        else:
            break
    return word


def _stem_phrase(text: str) -> str:
    return " ".join(stem(w) for w in text.split())


CONCEPTS: dict[str, tuple[str, ...]] = {}
for _key, _words in _CONCEPT_WORDS.items():
    _stems = tuple(_stem_phrase(w) for w in _words if _stem_phrase(w) != _stem_phrase(_key))
    CONCEPTS[_stem_phrase(_key)] = tuple(dict.fromkeys(CONCEPTS.get(_stem_phrase(_key), ()) + _stems))

# first stem of a phrase of the concept table -> the phrases' stem sequences, longest first
PHRASES: dict[str, tuple[tuple[str, ...], ...]] = {}
for _phrase in sorted({p for p in (*CONCEPTS, *(w for ws in CONCEPTS.values() for w in ws)) if " " in p}):
    _parts = tuple(_phrase.split())
    PHRASES[_parts[0]] = tuple(sorted((*PHRASES.get(_parts[0], ()), _parts), key=len, reverse=True))


def _stem_sequence(text: str) -> list[str]:
    if not isinstance(text, str):
        return []
    words = _WORD.findall(text[:MAX_CHARS].lower())
    return [stem(w) for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def _phrase_at(sequence: list[str], i: int) -> tuple[str, ...] | None:
    for parts in PHRASES.get(sequence[i], ()):
        if tuple(sequence[i : i + len(parts)]) == parts:
            return parts
    return None


def passage_terms(text: str) -> frozenset[str]:
    """Content terms of ``text`` plus each phrase of the concept table that it contains."""
    sequence = _stem_sequence(text)
    phrases = (_phrase_at(sequence, i) for i in range(len(sequence)))
    return frozenset(sequence).union(" ".join(p) for p in phrases if p)


def query_terms(text: str) -> frozenset[str]:
    """Content terms of ``text`` with each phrase of the concept table as one term in place of its words."""
    sequence = _stem_sequence(text)
    out, i = set(), 0
    while i < len(sequence):
        parts = _phrase_at(sequence, i) or (sequence[i],)
        out.add(" ".join(parts))
        i += len(parts)
    return frozenset(out)


def terms(text: str, expand: bool = False) -> frozenset[str]:
    """Content terms of ``text``; with ``expand``, plus the concept words they stand for."""
    out = set(_stem_sequence(text))
    if expand:
        for term in list(out):
            out.update(CONCEPTS.get(term, ()))
    return frozenset(out)


def idf(passages: Sequence[frozenset[str]]) -> dict[str, float]:
    """BM25 inverse document frequency of every term of ``passages`` (always positive)."""
    counts: dict[str, int] = {}
    for passage in passages:
        for term in passage:
            counts[term] = counts.get(term, 0) + 1
    n = len(passages)
    return {term: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for term, c in counts.items()}


def _unseen_idf(n_passages: int, as_if_seen_in: float) -> float:
    """Weight of a query term no passage contains: the idf it would have in ``as_if_seen_in`` passages."""
    return math.log(1.0 + (n_passages - as_if_seen_in + 0.5) / (as_if_seen_in + 0.5))


def coverage_scores(query: str, passages: Sequence[str]) -> list[float]:
    """Per passage, the idf-weighted share of the query's terms that the passage contains.

    A phrase of the concept table is one query term that weighs as its words together (so
    "Is your blood pressure high?" keeps its balance between pressure and "high"). A concept
    hit earns the query term's weight times min(1, idf of the hit / idf of the term): a
    stand-in as specific as the term counts fully, a commoner one less, and expansion never
    makes a score exceed 1.
    """
    sets = [passage_terms(p) for p in passages]
    weights = idf(sets)
    unseen = _unseen_idf(len(sets), 0.0)
    base = query_terms(query)
    if not base or not sets:
        return [0.0] * len(sets)
    term_weight = {t: sum(weights.get(w, unseen) for w in t.split()) for t in base}
    total = sum(term_weight.values())
    scores = []
    for passage in sets:
        got = 0.0
        for term in base:
            if term in passage:
                got += term_weight[term]
                continue
            hits = [weights.get(a, unseen) for a in CONCEPTS.get(term, ()) if a in passage]
            if hits:
                got += term_weight[term] * min(1.0, max(hits) / weights.get(term, unseen))
        scores.append(got / total)
    return scores


def _cosine(a: frozenset[str], b: frozenset[str], weights: dict[str, float], unseen: float) -> float:
    if not a or not b:
        return 0.0
    shared = sum(weights.get(t, unseen) ** 2 for t in a & b)
    norm_a = math.sqrt(sum(weights.get(t, unseen) ** 2 for t in a))
    norm_b = math.sqrt(sum(weights.get(t, unseen) ** 2 for t in b))
    return shared / (norm_a * norm_b)


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text[:MAX_CHARS].strip()) if s]


def similarity_scores(query: str, passages: Sequence[str]) -> list[float]:
    """Per passage, the best idf-weighted cosine between the query and the passage or one of its sentences."""
    whole = [terms(p, expand=True) for p in passages]
    weights = idf(whole)
    unseen = _unseen_idf(len(whole), 1.0)
    q = terms(query, expand=True)
    scores = []
    for passage, full in zip(passages, whole, strict=True):
        parts = [full] + [terms(s, expand=True) for s in sentences(passage)]
        scores.append(max(_cosine(q, part, weights, unseen) for part in parts))
    return scores


def question_key(text: str) -> frozenset[str] | str:
    """Identity of a question for repeat detection: its content terms, or its normalised
    words when it has none ("What else?" and "what ELSE" are the same question)."""
    found = terms(text)
    if found:
        return found
    return " ".join(_WORD.findall(text[:MAX_CHARS].lower())) if isinstance(text, str) else ""
