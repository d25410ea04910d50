"""Deterministic lexical matching: the "understanding" of the offline simulated users.

Text becomes a set of *terms*: lower-case ASCII words (letters and digits, split at any
other character), minus a stop list of function words and question words, reduced by a
small suffix stripper so that "urinating", "urination" and "urinated" meet, and extended
by a short table of concept words (a question about "vitals" reaches facts that mention
temperature or pulse). Scores weight each term by a BM25-style inverse document frequency
over the passages being searched, so that words every passage shares count little; a query
term that no passage contains weighs as a term of zero passages (coverage: it counts fully
against a match) or of one passage (similarity: a softer penalty, since paraphrases of a
short table row bring words of their own).

Two scores are used:

- :func:`coverage_scores`: the share of the *query's* term weight that a passage contains.
  The patient of MediQ reveals a fact when it covers enough of the question.
- :func:`similarity_scores`: an idf-weighted cosine of term sets, taken as the best over a
  passage's sentences and the whole passage. The FloDial user maps a question to a table
  row with it, since both sides are questions of similar length.

Every function accepts any string (length is capped at :data:`MAX_CHARS`) and never raises
on odd text; this module reads the agent's question only after :mod:`envs.parsing` has
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
    patient patients anyone someone something currently recently ever describe experience experiencing
    noticed notice kind sort type feel feeling feels happen happened happening thing things one
    sign signs symptom symptoms problem problems issue issues
    """.split()
)

_SUFFIXES = (
    "ational", "ations", "ation", "ating", "ated", "ates", "ate", "ings", "ing", "ies", "ied",
    "ness", "ment", "ers", "er", "ed", "es", "ly", "s", "e",
)  # fmt: skip
MIN_STEM = 3

# concept word -> words it also stands for; both sides are stemmed at import
_CONCEPT_WORDS: dict[str, tuple[str, ...]] = {
    "old": ("age", "aged", "year"),
    "age": ("old", "year"),
    "gender": ("male", "female", "man", "woman", "boy", "girl", "sex"),
    "sex": ("male", "female", "man", "woman", "boy", "girl", "sexual", "sexually"),
    "vitals": ("temperature", "pulse", "pressure", "respirations", "respiratory", "rate", "saturation"),
    "temperature": ("fever", "febrile"),
    "fever": ("temperature", "febrile"),
    "medication": ("medicine", "drug", "taking", "therapy"),
    "medicine": ("medication", "drug", "taking"),
    "drug": ("medication", "medicine", "taking"),
    "smoking": ("cigarette", "tobacco", "pack"),
    "alcohol": ("drink", "drinks", "beer", "wine"),
    "drink": ("alcohol", "beer", "wine"),
    "family": ("mother", "father", "sister", "brother", "parent", "sibling"),
    "lab": ("level", "count", "serum", "concentration", "laboratory"),
    "labs": ("level", "count", "serum", "concentration", "laboratory"),
    "laboratory": ("level", "count", "serum", "concentration", "lab"),
    "test": ("level", "count", "serum", "shows", "positive", "negative"),
    "allergy": ("allergic", "allergies"),
    "surgery": ("surgical", "operation", "underwent", "surgeries"),
    "travel": ("trip", "visited", "returned", "traveled"),
    "exam": ("examination", "shows", "reveals"),
    "urine": ("urinary", "urination", "voiding", "micturition"),
    "breathing": ("respiration", "respiratory", "dyspnea", "breathless", "breath"),
}


def stem(word: str) -> str:
    """Strip the first listed matching suffix, twice at most, keeping :data:`MIN_STEM` letters."""
    for _ in range(2):
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
                word = word[: -len(suffix)]
                break
        else:
            break
    return word


CONCEPTS: dict[str, tuple[str, ...]] = {}
for _key, _words in _CONCEPT_WORDS.items():
    _stems = tuple(stem(w) for w in _words if stem(w) != stem(_key))
    CONCEPTS[stem(_key)] = tuple(dict.fromkeys(CONCEPTS.get(stem(_key), ()) + _stems))


def terms(text: str, expand: bool = False) -> frozenset[str]:
    """Content terms of ``text``; with ``expand``, plus the concept words they stand for."""
    if not isinstance(text, str):
        return frozenset()
    words = _WORD.findall(text[:MAX_CHARS].lower())
    out = {stem(w) for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())}
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

    The query is expanded with concept words; a concept hit counts with the weight of the
    query term it came from, so expansion never makes a score exceed 1.
    """
    sets = [terms(p) for p in passages]
    weights = idf(sets)
    unseen = _unseen_idf(len(sets), 0.0)
    base = terms(query)
    if not base or not sets:
        return [0.0] * len(sets)
    total = sum(weights.get(t, unseen) for t in base)
    scores = []
    for passage in sets:
        got = 0.0
        for term in base:
            alternatives = (term, *CONCEPTS.get(term, ()))
            hits = [weights.get(a, unseen) for a in alternatives if a in passage]
            if hits:
                got += min(weights.get(term, unseen), max(hits))
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
