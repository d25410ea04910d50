"""Critique audit of MediQ with the offline patient.

Rows: eight cases written for this audit in the MediQ jsonl format (:data:`CASES`), run through
:func:`arew_mediq.data.normalize_case` as the data preparation does (known facts, the
opening); ``rows(n, seed)`` cycles over them in an order drawn from ``seed``.

The competent policy is an oracle: it asks about one open fact at a time in that fact's words,
choosing the wording the patient answers with that fact alone when there is one (it consults the
offline patient's own matcher), raises the gold option's margin after every new fact, keeps its
scores after "Unknown" (so its counterfactual update, which sees "Unknown.", is its previous
belief), and answers once no open fact is left.

Adversaries:

- ``stuffing``: one question packed with the content words of every open fact (reordered each
  turn); ``stuff_options``: the options' names and every history-taking keyword at once;
- ``generic``: open questions with no content ("What else can you tell me?");
- ``known_facts``: asks about what the opening already says;
- ``repeat_reworded``: a fact's question, then the same words reordered and padded;
- ``answer_early``: one good question, then the final answer in place of the update;
- ``format``: several payloads, mixed payloads, out-of-range or unlabelled scores;
- ``copy_belief``: good questions, the scores never move;
- ``random_move``: good questions; after new facts a random move of the scores, after
  "Unknown" no move (so every counterfactual stays put); ``random_move_silent``: the same, but
  it writes no scores at all after "Unknown", so its counterfactual is always missing;
- ``raise_all``: good questions; every score goes up after new facts;
- ``raise_top``: good questions; the option it already favours (A at first) goes up after new
  facts, the others down, so it never learns which option the facts support;
- ``oscillate``: good questions; the scores flip between two fixed vectors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from arew.audit.runner import Policy, TaskAudit, View, vector_text
from arew.envs.users import FactRequest, OfflineUser
from arew_mediq.data import normalize_case
from arew_mediq.env import MediQEnv

CASES: tuple[dict[str, Any], ...] = (
    {
        "id": "audit-1",
        "question": "Which of the following is the most likely diagnosis?",
        "context": [
            "A 34-year-old man comes to the emergency department because of a cough.",
            "It began four days ago.",
        ],
        "options": {"A": "Asthma exacerbation", "B": "Lobar pneumonia", "C": "Pulmonary embolism", "D": "Pneumothorax"},
        "answer": "Lobar pneumonia",
        "answer_idx": "B",
        "facts": [
            "1. A 34-year-old man comes to the emergency department because of a cough.",
            "2. The cough brings up rusty yellow sputum.",
            "3. His temperature is 39.4 C.",
            "4. He has shaking chills at night.",
            "5. Crackles are heard over the right lower lobe.",
            "6. A chest radiograph shows consolidation of the right lower lobe.",
            "7. He has never had wheezing.",
            "8. He smokes a pack of cigarettes a day.",
            "9. His pulse is 112 per minute.",
            "10. The pain in his right side is worse on deep breaths.",
            "11. His oxygen saturation is 93 percent on room air.",
        ],
    },
    {
        "id": "audit-2",
        "question": "Which of the following is the most appropriate next step in management?",
        "context": [
            "A 61-year-old woman presents with crushing chest pain that started an hour ago.",
            "She is sweating.",
        ],
        "options": {
            "A": "Reassurance and discharge",
            "B": "Oral antacid",
            "C": "Percutaneous coronary intervention",
            "D": "Chest physiotherapy",
        },
        "answer": "Percutaneous coronary intervention",
        "answer_idx": "C",
        "facts": [
            "1. A 61-year-old woman presents with crushing chest pain that started an hour ago.",
            "2. The pain radiates to her left arm and jaw.",
            "3. She has had type 2 diabetes for twelve years.",
            "4. Her electrocardiogram shows ST elevation in leads II, III and aVF.",
            "5. Her troponin level is raised.",
            "6. She vomited once on the way to the hospital.",
            "7. Her father died of a heart attack at 58.",
            "8. She smokes twenty cigarettes daily.",
            "9. Her blood pressure is 100/60 mm Hg.",
            "10. She takes metformin every morning.",
            "11. Her pulse is 48 per minute.",
        ],
    },
    {
        "id": "audit-3",
        "question": "Which of the following is the most likely cause of her symptoms?",
        "context": [
            "A 24-year-old woman comes to the clinic because of burning pain when urinating.",
            "It began two days ago.",
        ],
        "options": {
            "A": "Nephrolithiasis",
            "B": "Acute cystitis",
            "C": "Vulvovaginal candidiasis",
            "D": "Acute appendicitis",
        },
        "answer": "Acute cystitis",
        "answer_idx": "B",
        "facts": [
            "1. A 24-year-old woman comes to the clinic because of burning pain when urinating.",
            "2. She has to urinate far more often than usual.",
            "3. There is tenderness above the pubic bone.",
            "4. A urine dipstick is positive for nitrites and leukocyte esterase.",
            "5. She has no vaginal discharge.",
            "6. She has no flank pain.",
            "7. Her last menstrual period ended a week ago.",
            "8. She is sexually active with one partner.",
            "9. Her temperature is 37.1 C.",
            "10. She had a similar episode last year.",
            "11. She is not pregnant.",
        ],
    },
    {
        "id": "audit-4",
        "question": "Which of the following is the most likely diagnosis?",
        "context": [
            "A 6-year-old boy is brought to the physician because of an itchy rash on both arms.",
            "His mother noticed it a week ago.",
        ],
        "options": {"A": "Atopic dermatitis", "B": "Plaque psoriasis", "C": "Scabies", "D": "Impetigo"},
        "answer": "Atopic dermatitis",
        "answer_idx": "A",
        "facts": [
            "1. A 6-year-old boy is brought to the physician because of an itchy rash on both arms.",
            "2. The skin in the creases of the elbows is red, dry and thickened.",
            "3. He has had similar flares every winter since infancy.",
            "4. He uses an inhaler for asthma.",
            "5. His sister has hay fever.",
            "6. Nobody else in the household is itching.",
            "7. There are no honey-colored crusts.",
            "8. The itching is worst at night.",
            "9. His cheeks were red and scaly as a baby.",
            "10. There are no burrows between his fingers.",
            "11. Woolen sweaters make the itching worse.",
        ],
    },
    {
        "id": "audit-5",
        "question": "Which of the following is the most likely diagnosis?",
        "context": ["A 45-year-old woman comes to the physician because of fatigue and weight gain over six months."],
        "options": {
            "A": "Hypothyroidism",
            "B": "Major depressive disorder",
            "C": "Cushing syndrome",
            "D": "Iron deficiency anemia",
        },
        "answer": "Hypothyroidism",
        "answer_idx": "A",
        "facts": [
            "1. A 45-year-old woman comes to the physician because of fatigue and weight gain over six months.",
            "2. She always feels cold, even in summer.",
            "3. Her skin has become dry and coarse.",
            "4. She has constipation most weeks.",
            "5. Her TSH concentration is elevated.",
            "6. Her ankle reflexes relax slowly.",
            "7. Her hemoglobin concentration is normal.",
            "8. Her hair has become thin and brittle.",
            "9. Her pulse is 54 per minute.",
            "10. Her mother has a thyroid disorder.",
            "11. She does not feel sad and still enjoys her hobbies.",
        ],
    },
    {
        "id": "audit-6",
        "question": "Which of the following is the most likely diagnosis?",
        "context": [
            "A 19-year-old college student is brought to the emergency department with a severe headache and vomiting."
        ],
        "options": {
            "A": "Migraine",
            "B": "Bacterial meningitis",
            "C": "Subarachnoid hemorrhage",
            "D": "Tension headache",
        },
        "answer": "Bacterial meningitis",
        "answer_idx": "B",
        "facts": [
            "1. A 19-year-old college student is brought to the emergency department with a severe headache and vomiting.",
            "2. Her neck is stiff and bending it forward is painful.",
            "3. Her temperature is 39.8 C.",
            "4. A purple rash that does not blanch covers her legs.",
            "5. Bright light hurts her eyes.",
            "6. She lives in a crowded dormitory.",
            "7. The headache came on over several hours, not suddenly.",
            "8. Her pulse is 124 per minute.",
            "9. A roommate was treated for a throat infection last month.",
            "10. She has not received the meningococcal vaccine.",
            "11. She is confused about the date.",
        ],
    },
    {
        "id": "audit-7",
        "question": "Which of the following is the most likely diagnosis?",
        "context": ["A 72-year-old man comes to the clinic because his right leg has been swollen for three days."],
        "options": {"A": "Cellulitis", "B": "Deep vein thrombosis", "C": "Heart failure", "D": "Baker cyst rupture"},
        "answer": "Deep vein thrombosis",
        "answer_idx": "B",
        "facts": [
            "1. A 72-year-old man comes to the clinic because his right leg has been swollen for three days.",
            "2. He had a hip replacement three weeks ago.",
            "3. The calf is tender along the deep veins.",
            "4. The right calf is four centimeters wider than the left.",
            "5. The skin over the leg is not red and not warm.",
            "6. He has no shortness of breath.",
            "7. A compression ultrasound shows a noncompressible popliteal vein.",
            "8. He has taken no walks since the operation.",
            "9. He had prostate cancer treated two years ago.",
            "10. Both ankles were normal before the surgery.",
            "11. There is no pitting edema of the left leg.",
        ],
    },
    {
        "id": "audit-8",
        "question": "Which of the following is the most likely diagnosis?",
        "context": [
            "A 28-year-old woman comes to the physician because of palpitations and weight loss for two months."
        ],
        "options": {
            "A": "Graves disease",
            "B": "Generalized anxiety disorder",
            "C": "Pheochromocytoma",
            "D": "Anorexia nervosa",
        },
        "answer": "Graves disease",
        "answer_idx": "A",
        "facts": [
            "1. A 28-year-old woman comes to the physician because of palpitations and weight loss for two months.",
            "2. Her eyes bulge forward.",
            "3. Her hands tremble finely.",
            "4. She feels too hot in rooms others find cool.",
            "5. Her thyroid gland is diffusely enlarged and painless.",
            "6. She eats more than usual.",
            "7. Her TSH concentration is suppressed.",
            "8. She sweats a lot and prefers cold drinks.",
            "9. Her periods have become light.",
            "10. Her pulse is 118 per minute and irregular.",
            "11. She does not fear gaining weight.",
        ],
    },
)


def normalized_cases() -> list[dict[str, Any]]:
    """The :data:`CASES` as the data preparation would store them (``normalize_case``)."""
    cases = [normalize_case(record) for record in CASES]
    if any(case is None for case in cases):
        raise ValueError("an audit case does not pass normalize_case")
    return cases  # type: ignore[return-value]


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` rows' ``extra_info``, cycling over the cases in an order drawn from ``seed``."""
    cases = normalized_cases()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(cases))
    return [
        {**cases[order[k % len(cases)]], "split": "audit", "index": k, "seed": int(rng.integers(2**31))}
        for k in range(n)
    ]


def open_facts(env: MediQEnv) -> list[int]:
    return [i for i in range(len(env.facts)) if i not in env._revealed]


def fact_question(fact: str) -> str:
    """A question in the fact's own words."""
    return f"Is it true that {fact[0].lower()}{fact[1:].rstrip('.')}?"


def predicted_reveal(env: MediQEnv, question: str) -> tuple[int, ...]:
    """What the offline patient would reveal for ``question`` now."""
    user = env.user if isinstance(env.user, OfflineUser) else OfflineUser()
    return user.answer(FactRequest(question, env.facts, tuple(open_facts(env)), env.max_facts))


def good_question(env: MediQEnv) -> str | None:
    """A question that reveals one open fact (two if no wording reveals one alone); None when none is left."""
    fallback = None
    for i in open_facts(env):
        question = fact_question(env.facts[i])
        reveal = predicted_reveal(env, question)
        if reveal == (i,):
            return question
        if reveal and fallback is None:
            fallback = question
    return fallback


class _MediQPolicy:
    """Good questions; :meth:`step` gives the scores after news; no move after "Unknown"."""

    def __init__(self) -> None:
        self.w = np.full(4, 0.25)
        self.news = 0  # informative answers so far

    def __call__(self, view: View) -> str:
        env: MediQEnv = view.env  # type: ignore[assignment]
        if view.round == "act":
            return f"<scratch>ask</scratch><interact>{self.question(view, env)}</interact>"
        if view.round == "counterfactual_update":
            return f"<interact>{vector_text(self.react(view, env, informative=False, commit=False))}</interact>"
        if view.round == "update":
            self.w = np.round(self.react(view, env, env.informative, commit=True), 3)
            return f"<scratch>update</scratch><interact>{vector_text(self.w)}</interact>"
        return f"<answer>{vector_text(self.w)}</answer>"

    def question(self, view: View, env: MediQEnv) -> str:
        return good_question(env) or "Is there anything else you have not told me yet?"

    def react(self, view: View, env: MediQEnv, informative: bool, commit: bool) -> np.ndarray:
        if not informative:
            return self.w
        if commit:
            self.news += 1
        return self.step(view, env, self.news if commit else self.news + 1)

    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        return self.w


class Competent(_MediQPolicy):
    """Raises the gold margin after every new fact; answers when no open fact is left."""

    def __call__(self, view: View) -> str:
        env: MediQEnv = view.env  # type: ignore[assignment]
        if view.round == "act" and good_question(env) is None:
            return f"<scratch>nothing left to ask</scratch><answer>{vector_text(self.w)}</answer>"
        return super().__call__(view)

    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        share = 1.0 - 0.7**news
        w = np.full(4, 0.25 * (1.0 - share))
        w[env.gold] = 0.25 + 0.75 * share
        return w


class Stuffing(_MediQPolicy):
    """Every open fact's content words in one question, shuffled each turn."""

    def question(self, view: View, env: MediQEnv) -> str:
        words: list[str] = []
        for i in open_facts(env) or range(len(env.facts)):
            words += [w.strip(".,") for w in env.facts[i].split() if len(w) > 3]
        words = list(dict.fromkeys(words))
        np.random.default_rng(view.turn).shuffle(words)
        text = ""
        for word in words:
            if len(text) + len(word) + 2 > 290:
                break
            text += word + " "
        return text.strip() + "?"


class StuffOptions(_MediQPolicy):
    """The options' names and every history-taking keyword in one question."""

    KEYWORDS = "fever pain cough medication smoking alcohol family history travel allergy surgery urine breathing rash exam lab"

    def question(self, view: View, env: MediQEnv) -> str:
        words = " ".join(env.options).split() + self.KEYWORDS.split()
        np.random.default_rng(view.turn).shuffle(words)
        return (" ".join(words))[:290] + "?"


class Generic(_MediQPolicy):
    QUESTIONS = (
        "What else can you tell me?",
        "Is there anything else I should know?",
        "How are you feeling today?",
        "Can you describe your symptoms?",
        "What brings you here?",
        "Anything more?",
    )

    def question(self, view: View, env: MediQEnv) -> str:
        return self.QUESTIONS[view.turn % len(self.QUESTIONS)]


class KnownFacts(_MediQPolicy):
    """Asks about what the opening already says (known facts and the opening's sentence)."""

    def question(self, view: View, env: MediQEnv) -> str:
        known = [env.facts[i] for i in sorted(env.known)] or [env.initial_info]
        return fact_question(known[view.turn % len(known)])


class RepeatReworded(_MediQPolicy):
    """A good question, then the same words reordered and padded, again and again."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def question(self, view: View, env: MediQEnv) -> str:
        if self.first is None:
            self.first = good_question(env) or "Do you have a fever?"
            return self.first
        words = self.first.rstrip("?").split()
        np.random.default_rng(view.turn).shuffle(words)
        padding = ("Please tell me,", "Doctor here:", "Honestly,", "Just to check,")[view.turn % 4]
        return f"{padding} {' '.join(words)}?"


class AnswerEarly(_MediQPolicy):
    """One good question, then the final answer in place of the update (a guess: option A)."""

    def __call__(self, view: View) -> str:
        if view.round == "update":
            return "<answer>0.4, 0.2, 0.2, 0.2</answer>"
        return super().__call__(view)


class Format(_MediQPolicy):
    def __call__(self, view: View) -> str:
        env: MediQEnv = view.env  # type: ignore[assignment]
        question = good_question(env) or "Do you have a fever?"
        if view.round == "act":
            tricks = (
                f"<interact>{question}</interact><interact>{question}</interact>",
                f"<interact>{question}</interact><answer>0.25, 0.25, 0.25, 0.25</answer>",
                f"<interact>{question}",
                f"<interact>{'?' * 20}</interact>",
                f"<interact>{question} {'and more ' * 40}</interact>",
            )
        else:
            tricks = (
                "<interact>0.1, 0.2, 0.3, 0.4</interact><interact>0.1, 0.2, 0.3, 0.4</interact>",
                "<interact>A: 0.7, B: 0.1, C: 0.1, D: 0.1</interact>",
                "<interact>1.5, 0.2, 0.2, 0.2</interact>",
                "<interact>0.7, 0.1, 0.1</interact>",
                "<interact>my scores are 0.7, 0.1, 0.1, 0.1</interact>",
            )
        text = tricks[view.turn % len(tricks)]
        return text.replace("interact>", "answer>") if view.round == "answer" else text


class CopyBelief(_MediQPolicy):
    pass


class RandomMove(_MediQPolicy):
    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        return np.round(np.random.default_rng([view.turn, news]).uniform(0.05, 0.95, 4), 2)


class RandomMoveSilent(RandomMove):
    """``random_move`` that writes no scores after "Unknown" (so its counterfactual is missing too)."""

    def __call__(self, view: View) -> str:
        env: MediQEnv = view.env  # type: ignore[assignment]
        if view.round == "counterfactual_update" or (view.round == "update" and not env.informative):
            return "<scratch>nothing new, so nothing to say</scratch>"
        return super().__call__(view)


class RaiseAll(_MediQPolicy):
    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        return np.minimum(self.w + 0.1, 1.0)


class RaiseTop(_MediQPolicy):
    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        top = int(np.argmax(self.w))
        w = self.w * 0.8
        w[top] = min(1.0, self.w[top] + 0.1)
        return w


class Oscillate(_MediQPolicy):
    def step(self, view: View, env: MediQEnv, news: int) -> np.ndarray:
        return np.array([0.7, 0.1, 0.1, 0.1]) if news % 2 else np.array([0.1, 0.1, 0.1, 0.7])


class WrongAnswer(Competent):
    """The competent episode, then an answer that puts another option on top. The final answer gets no critique (the
    reward judges it), so this ties the competent policy's critiques at reward 0: the tie is the design (docs/method.md §2)."""

    def __call__(self, view: View) -> str:
        text = super().__call__(view)
        if "<answer>" in text:
            env: MediQEnv = view.env  # type: ignore[assignment]
            swapped = self.w.copy()
            other = (env.gold + 1) % len(swapped)
            swapped[[env.gold, other]] = swapped[[other, env.gold]]
            text = text.replace(f"<answer>{vector_text(self.w)}</answer>", f"<answer>{vector_text(swapped)}</answer>")
        return text


ADVERSARIES: dict[str, Callable[[], Policy]] = {
    "wrong_answer": WrongAnswer,
    "stuffing": Stuffing,
    "stuff_options": StuffOptions,
    "generic": Generic,
    "known_facts": KnownFacts,
    "repeat_reworded": RepeatReworded,
    "answer_early": AnswerEarly,
    "format": Format,
    "copy_belief": CopyBelief,
    "random_move": RandomMove,
    "random_move_silent": RandomMoveSilent,
    "raise_all": RaiseAll,
    "raise_top": RaiseTop,
    "oscillate": Oscillate,
}

AUDITS: tuple[TaskAudit, ...] = (
    TaskAudit(name="mediq", task="mediq", rows=rows, competent=Competent, adversaries=dict(ADVERSARIES)),
)
