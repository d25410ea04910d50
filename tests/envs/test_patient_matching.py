"""The offline MediQ patient reveals facts that answer the question, not facts that share a stray word with it.

Each case is a project-written chart of short facts, about as many as a MediQ case has;
the unwanted facts mimic false reveals seen on the development file (a concept expansion
or a merged stem made an unrelated fact count as the answer), the wanted ones answers the
tightening must keep.
"""

import pytest

from arew.envs.lexical import coverage_scores
from arew.envs.users import FactRequest
from arew.envs.users.offline import select_facts

SKIN_CASE = (
    "The rash returned after she visited her dermatologist.",
    "He returned from a trip to Brazil two weeks ago.",
    "Temperature is 38.5 C, pulse 110/min.",
    "Blood pressure is 150/95 mm Hg.",
    "The lesion blanches with pressure.",
    "Respiratory rate is 18/min.",
    "Erythrocyte sedimentation rate is 40 mm/h.",
    "She had a respiratory infection last winter.",
    "FEV is 70% of predicted.",
    "The plaques first appeared three years ago.",
    "Her older sister has eczema.",
    "She used over-the-counter hydrocortisone cream.",
    "He received two units of packed red blood cells.",
    "Distal pulses are palpable.",
    "Past medical history is significant for celiac disease.",
)
HISTORY_CASE = (
    "He has a 20 pack-year smoking history.",
    "Serum potassium is 3.1 mEq/L.",
    "Her mother has psoriasis.",
    "She is 34 years old.",
    "Family history is significant for colon cancer.",
    "The itching is worse at night.",
    "She works as a nurse.",
    "Her father died of a stroke.",
)


def revealed(question: str, facts: tuple[str, ...], max_facts: int = 3) -> set[str]:
    return {facts[i] for i in select_facts(FactRequest(question, facts, tuple(range(len(facts))), max_facts))}


@pytest.mark.parametrize(
    ("question", "facts", "wanted", "unwanted"),
    [
        (
            "Have you traveled recently?",
            SKIN_CASE,
            {"He returned from a trip to Brazil two weeks ago."},
            {"The rash returned after she visited her dermatologist."},
        ),
        (
            "What are your vital signs?",
            SKIN_CASE,
            {"Temperature is 38.5 C, pulse 110/min.", "Blood pressure is 150/95 mm Hg."},
            {"The lesion blanches with pressure.", "Erythrocyte sedimentation rate is 40 mm/h.",
             "She had a respiratory infection last winter.", "Distal pulses are palpable."},
        ),
        (
            "What is your heart rate?",
            SKIN_CASE,
            {"Temperature is 38.5 C, pulse 110/min."},
            {"Respiratory rate is 18/min.", "Erythrocyte sedimentation rate is 40 mm/h."},
        ),
        ("Is your blood pressure high?", SKIN_CASE, {"Blood pressure is 150/95 mm Hg."}, {"The lesion blanches with pressure."}),
        ("Have you had a fever?", SKIN_CASE, {"Temperature is 38.5 C, pulse 110/min."}, {"FEV is 70% of predicted."}),
        ("How old are you?", SKIN_CASE, set(), {"The plaques first appeared three years ago.", "Her older sister has eczema."}),
        ("Have you had any laboratory tests?", SKIN_CASE, set(), {"She used over-the-counter hydrocortisone cream."}),
        ("Do you smoke?", SKIN_CASE, set(), {"He received two units of packed red blood cells."}),
        ("Any breathing problems?", SKIN_CASE, set(), {"Respiratory rate is 18/min.", "She had a respiratory infection last winter."}),
        (
            "Is there any family history of disease?",
            SKIN_CASE,
            set(),
            {"Past medical history is significant for celiac disease."},
        ),
        ("Do you smoke?", HISTORY_CASE, {"He has a 20 pack-year smoking history."}, set()),
        ("Is there any family history of disease?", HISTORY_CASE, {"Family history is significant for colon cancer."}, set()),
        ("Have you had any lab tests?", HISTORY_CASE, {"Serum potassium is 3.1 mEq/L."}, set()),
    ],
)  # fmt: skip
def test_reveals_answers_and_not_stray_word_matches(question, facts, wanted, unwanted):
    got = revealed(question, facts)
    assert wanted <= got
    assert not unwanted & got


def test_phrase_words_in_another_order_or_apart_are_not_the_phrase():
    facts = ("The rate of pressure change in the blood vessel is slow.", "Blood pressure is 120/80 mm Hg.", "She has a cough.")
    scores = coverage_scores("What is your blood pressure?", facts)
    assert scores[1] == 1.0
    assert scores[0] < 0.5

