"""Precision and recall of the offline MediQ patient's reveals against questions written from the facts.

    python benchmarks/mediq_patient_matching.py path/to/mediq_dev.jsonl [--limit N] [--threshold T]

The offline patient (:func:`arew.envs.users.offline.select_facts`) decides which facts answer a
question; a fact revealed for a question it does not answer turns an uninformative question
into AS +1. This script builds a labelled question set from each usable case of the file
(:func:`arew_mediq.data.normalize_case`; the candidate facts are those not known from the
opening) and scores the patient's reveals (at most ``max_facts`` = 2 per question, as in the
environment) against the labels.

Two families of questions:

- **targeted**: one per open fact, "Tell me about the W1 W2." with W1 W2 the fact's two rarest
  content words within its case (letters only, at least four of them, not stop words; ties: the
  longer word, then the earlier). Relevant: the target fact and every other open fact holding
  both words as whole words (it answers the question as literally as the target does). These
  questions guard recall: a tightening that loses facts asked about in their own words shows
  here.
- **history**: the fixed history-taking questions of :data:`HISTORY` (travel, vital signs,
  fever, medications, allergies, family history, pain, duration, ...), asked in every case.
  A fact is relevant when a keyword pattern written for the question matches it
  (case-insensitive regular expression over the fact's text). A question with no relevant
  fact in a case still counts: whatever it reveals there is a false reveal, which is the
  failure this benchmark is for ("Have you traveled recently?" revealing a visit to the
  clinic; "What are your vital signs?" revealing a lesion's response to pressure).

Figures, micro-averaged over questions: precision = relevant reveals / reveals; recall =
relevant reveals / sum over questions of min(relevant facts, max_facts), since no answer can
reveal more than ``max_facts``. Counts are printed beside them.

Weaknesses of the labelling, to keep in mind when reading the figures:

- targeted questions reuse the fact's own words, so a lexical matcher finds them easily; their
  recall is an upper bound, not what a doctor's paraphrase would get, and their relevance rule
  misses facts that answer in other words (a false reveal there may be a true answer);
- the history patterns are hand-written keyword rules: they miss answers phrased without the
  keywords (drug names without "taking", a duration without "for ... days") and accept some
  mentions that do not answer (a "pain" negated in a list, "mother" as the person who brought
  the child, another person's age for "How old are you?"); they were written from the
  question's meaning, not tuned to the matcher, but by the same people who tuned the matcher,
  so the history figures are optimistic too. Reading the false reveals led to widening four
  rules where the reveal did answer ("worked", "families", "vitals", "drug or alcohol use");
  none was narrowed;
- the targeted rule counts a fact holding both words anywhere ("heart ... rate"), while the
  matcher takes some word pairs as phrases ("heart rate"), so a few targeted misses are facts
  that use the words apart ("a regular rate and rhythm");
- every history question is asked in every case, so questions the matcher cannot answer in any
  wording (duration) weigh on recall uniformly; per-question rows show where the losses are;
- one development file, no held-out set: read changes of a few points as noise.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass

from arew.envs.lexical import STOPWORDS
from arew.envs.users.base import FactRequest
from arew.envs.users.offline import FACT_THRESHOLD, select_facts
from arew_mediq.data import normalize_case, read_source

MAX_FACTS = 2
_WORD = re.compile(r"[a-z]+")

# pattern a fact must match to answer the topic -> the topic's wordings
HISTORY: dict[str, tuple[str, ...]] = {
    r"travel|\btrips?\b|abroad|vacation|holiday|honeymoon|cruise|returned from|came back from|camping|hiking|immigrat|emigrat|refugee|visit(ed|ing) (?!.*(doctor|physician|clinic|hospital|department|nurse|office|visit))": (
        "Have you traveled recently?", "Have you been abroad lately?", "Any recent trips?"),
    r"temperature|\bpulse\b|blood pressure|heart rate|respiratory rate|respirations|saturation|spo2|vital signs|vitals\b|febrile|\bbp\b": (
        "What are your vital signs?", "What are your vitals?", "Can you tell me your vital signs?"),
    r"fever|febrile|temperature|chills": ("Do you have a fever?", "What is your temperature?", "Have you had fevers or chills?"),
    r"blood pressure|\bbp\b|hypertens|hypotens": ("What is your blood pressure?", "Is your blood pressure high?"),
    r"\bpulse|heart rate|tachycard|bradycard|palpitation": ("What is your heart rate?", "What is your pulse?"),
    r"medication|medicine|\bdrugs?\b|\btak(es|ing|en)\b|prescri|\bpills?\b|inhaler|supplement|contracepti|vitamin|insulin|therapy|treated with|\d+ ?mg\b(?!/)": (
        "What medications are you taking?", "Are you on any medicines?"),
    r"allerg": ("Do you have any allergies?", "Are you allergic to anything?"),
    r"famil(y|ies)|\b(mother|father|sister|brother|sibling|parent|aunt|uncle|grandmother|grandfather|cousin|son|daughter)s?\b.*\b(has|had|have|died|history|diagnosed|suffer|develop)": (
        "Does anyone in your family have a similar illness?", "Is there any family history of disease?", "Do your parents have any medical problems?"),
    r"smok|cigarette|tobacco|pack-?years?|vap": ("Do you smoke?", "Do you use tobacco?"),
    r"alcohol|drinks?\b|drinking|\bbeers?\b|\bwine\b|liquor": ("Do you drink alcohol?", "How much alcohol do you drink?"),
    r"illicit|recreational|cocaine|heroin|marijuana|cannabis|methamphetamine|intravenous drug|\bdrugs?\b.*\buse\b|\buses?\b.*\bdrugs?\b|substance": (
        "Do you use any recreational drugs?", "Do you use illicit drugs?"),
    r"pain|ache|tender|hurts?\b|discomfort|cramp": ("Are you in pain?", "Where does it hurt?"),
    r"\b(for|since|over|past|last)\b.*\b\d+|\bago\b|began|started|onset": (
        "How long have you had these symptoms?", "When did this start?"),
    r"surg|operation|operated|underwent|procedure|resection|ectomy|otomy": ("Have you had any surgery?", "Have you had any operations before?"),
    r"sexual|partner|condom|intercourse": ("Are you sexually active?", "Do you have a sexual partner?"),
    r"history of|diagnosed|medical history|past medical|chronic|known": (
        "Do you have any medical conditions?", "What is your past medical history?", "Have you been diagnosed with any illnesses?"),
    r"laboratory|serum|\blevels?\b|\bcounts?\b|g/dl|mg/dl|meq|mmol|/mm3|u/l|hemoglobin|leukocyte|platelet|\blabs?\b|blood (test|work|culture)": (
        "What did your blood tests show?", "What were your lab results?", "Have you had any laboratory tests?"),
    r"examination|\bexam\b|auscultation|palpation|inspection|on physical": (
        "What did the physical examination show?", "What did the doctor find on examination?"),
    r"cough|sputum|phlegm": ("Do you have a cough?", "Are you coughing up anything?"),
    r"breath|dyspnea|dyspnoea|wheez|respiratory distress": ("Are you short of breath?", "Do you have trouble breathing?"),
    r"urin|void|micturition|dysuria|bladder": ("Do you have problems urinating?", "Is there any pain when urinating?"),
    r"rash|lesion|erythem|papul|macul|vesic|plaque|pustul|blister|hives|urticari|itch|prurit|skin": (
        "Do you have a rash?", "Have you noticed any skin changes?", "Does the rash itch?"),
    r"weight|appetite": ("Have you lost weight?", "Has your appetite changed?"),
    r"nause|vomit|emesis": ("Do you have nausea or vomiting?", "Have you been vomiting?"),
    r"headache|migraine": ("Do you have headaches?",),
    r"sleep|insomnia|\bnaps?\b": ("How have you been sleeping?",),
    r"\bwork(s|ed|ing)?\b|\bjobs?\b|occupation|employ|retired|student": ("What do you do for work?", "What is your occupation?"),
    r"pregnan|gestation|gravida|menstrua|period|trimester": ("Could you be pregnant?", "When was your last menstrual period?"),
    r"vision|visual|sight|blurr|\beyes?\b": ("Any changes in your vision?",),
    r"diarrh|constipat|bowel|stool": ("Any diarrhea or constipation?",),
    r"injur|trauma|\bfall\b|\bfell\b|accident|\bhit\b|struck": ("Have you had any injuries?",),
    r"vaccin|immuni[sz]": ("Are your vaccinations up to date?",),
    r"year-old|years? old|\baged?\b": ("How old are you?",),
}


@dataclass(frozen=True)
class Question:
    family: str
    text: str
    relevant: frozenset[int]


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in STOPWORDS]


def targeted_questions(facts: list[str], open_ids: list[int]) -> list[Question]:
    bags = {i: set(_words(facts[i])) for i in open_ids}
    document_count = Counter(w for i in open_ids for w in bags[i])
    out = []
    for i in open_ids:
        ordered = list(dict.fromkeys(_words(facts[i])))
        key = sorted(ordered, key=lambda w: (document_count[w], -len(w), ordered.index(w)))[:2]
        if not key:
            continue
        relevant = frozenset(j for j in open_ids if set(key) <= bags[j])
        out.append(Question("targeted", f"Tell me about the {' '.join(key)}.", relevant))
    return out


def history_questions(facts: list[str], open_ids: list[int]) -> list[Question]:
    out = []
    for pattern, wordings in HISTORY.items():
        relevant = frozenset(i for i in open_ids if re.search(pattern, facts[i], re.IGNORECASE))
        out += [Question("history", text, relevant) for text in wordings]
    return out


@dataclass
class Tally:
    questions: int = 0
    reveals: int = 0
    correct: int = 0
    reachable: int = 0

    def add(self, relevant: frozenset[int], revealed: tuple[int, ...]) -> None:
        self.questions += 1
        self.reveals += len(revealed)
        self.correct += sum(i in relevant for i in revealed)
        self.reachable += min(len(relevant), MAX_FACTS)

    def row(self, name: str) -> str:
        precision = self.correct / self.reveals if self.reveals else float("nan")
        recall = self.correct / self.reachable if self.reachable else float("nan")
        return f"| {name} | {self.questions} | {self.reveals} | {self.correct} | {self.reachable} | {precision:.3f} | {recall:.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the MediQ development file (jsonl)")
    parser.add_argument("--limit", type=int, default=None, help="first N usable cases only")
    parser.add_argument("--threshold", type=float, default=FACT_THRESHOLD, help="the patient's fact threshold")
    parser.add_argument("--per-question", action="store_true", help="one row per history question")
    parser.add_argument("--show-false", type=int, default=0, help="print up to N false reveals of history questions")
    args = parser.parse_args()

    cases = [c for c in map(normalize_case, read_source(args.source)) if c is not None][: args.limit]
    tallies: dict[str, Tally] = {"targeted": Tally(), "history": Tally(), "all": Tally()}
    per_question: dict[str, Tally] = {text: Tally() for wordings in HISTORY.values() for text in wordings}
    false_reveals: list[str] = []
    for case in cases:
        facts = case["facts"]
        open_ids = [i for i in range(len(facts)) if i not in set(case["known_fact_ids"])]
        for question in targeted_questions(facts, open_ids) + history_questions(facts, open_ids):
            revealed = select_facts(FactRequest(question.text, tuple(facts), tuple(open_ids), MAX_FACTS), args.threshold)
            for name in (question.family, "all"):
                tallies[name].add(question.relevant, revealed)
            if question.family == "history":
                per_question[question.text].add(question.relevant, revealed)
                false_reveals += [f"{question.text} -> {facts[i]}" for i in revealed if i not in question.relevant]

    print(f"{len(cases)} cases, threshold {args.threshold}, at most {MAX_FACTS} facts per answer")
    print("| questions | n | reveals | relevant reveals | reachable | precision | recall |")
    print("|---|---|---|---|---|---|---|")
    for name, tally in tallies.items():
        print(tally.row(name))
    if args.per_question:
        for text, tally in per_question.items():
            print(tally.row(text))
    for line in false_reveals[: args.show_false]:
        print(line)


if __name__ == "__main__":
    main()
