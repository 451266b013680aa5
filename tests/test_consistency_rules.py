"""Paper Table 2 rules (Selvaraju et al.): one hand-worked question per rule, and the limits."""

from __future__ import annotations

import pytest

from vqadiag.protocols.consistency.reasoning_rules import RULES, classify, matching_rules

# (rule number, a question it flags as Perception) — one per row of Table 2.
FLAGGED = [
    (1, "How many dogs are there?"),
    (2, "What color is the bus?"),
    (3, "What is the man eating?"),
    (4, "What is on the plate?"),
    (5, "What is in the bowl?"),
    (6, "Is there a dog?"),
    (7, "Does the man wear glasses?"),
    (8, "Is the girl wearing a hat?"),
    (9, "Is this a banana?"),
    (10, "Where is the cat?"),
    (11, "How old is the boy?"),
    (12, "What kind of dog is it?"),
    (13, "What are they eating?"),
    (14, "Is the TV on?"),
    (15, "Are there clouds?"),
    (16, "What type of tree is this?"),
    (17, "What is he doing?"),
    (18, "Who is holding the umbrella?"),
    (19, "Is the plane flying low?"),
    (20, "Is the table round?"),
    (21, "Do the men have hats?"),
    (22, "Is the cat on the bed?"),
    (23, "Are these oranges?"),
    (24, "Is the dog in the car?"),
    (25, "Does the bus have doors?"),
    (26, "What number is on the jersey?"),
    (27, "What is this animal?"),
    (28, "Is it cooked?"),
    (29, "Is it raining?"),
    (30, "Is light on?"),
    (31, "Who is on the horse?"),
    (32, "What animals are shown?"),
    (33, "What sport is this?"),
    (34, "Is the sun out?"),
    (35, "Can you see the sky?"),
    (36, "Are clouds visible?"),
    (37, "What does the sign say?"),
    (38, "What instrument is the man playing?"),
    (39, "Are the kids in the pool?"),
    (40, "Are people on the beach?"),
]


def test_table_has_forty_rules():
    assert [r.number for r in RULES] == list(range(1, 41))
    assert {n for n, _ in FLAGGED} == set(range(1, 41))


@pytest.mark.parametrize(("number", "question"), FLAGGED)
def test_each_rule_fires(number, question):
    assert number in matching_rules(question)
    assert classify(question) == "perception"


@pytest.mark.parametrize(
    ("number", "question"),
    [
        (9, "Is this a healthy food?"),  # 5 words, the rule needs exactly 4
        (7, "Is it appropriate to wear shorts here?"),  # excluded word 'appropriate'
        (23, "Are these homemade?"),  # excluded word
        (23, "Are these bananas ripe?"),  # 4 words, the rule needs 3
        (24, "Is the bear in the wild?"),  # excluded word 'wild'
        (28, "Is it overexposed?"),  # excluded word
        (29, "Is it relaxing?"),  # excluded word
        (39, "Are the players in the US or Canada?"),  # excluded words 'US', 'or'
        (2, "Is the shirt colorful?"),  # words, not substrings: 'color' ≠ 'colorful'
        (11, "Is he holding a bold sign?"),  # 'old' is not a word here (rule 18 fires instead)
        (14, "Is the person happy?"),  # 'on?' must be the last word
        (20, "What is on the ground?"),  # last word 'ground', not 'round'
        (1, "How much does it cost?"),  # starts 'How', not 'How many'
        (30, "Isn't it on?"),  # first word 'isn't', not 'is'
    ],
)
def test_rule_parts_that_must_hold(number, question):
    assert number not in matching_rules(question)


@pytest.mark.parametrize(
    "question",
    [
        # the paper's own Reasoning examples (§3.1) survive every rule
        "Is the banana ripe enough to eat?",
        "Is this room finished or being built?",
        "At what time of the day would this meal be served?",
        "Does this water look fresh enough to drink?",
        "Is this a home or a hotel?",
        "Are the giraffes in their natural habitat?",
        "Is this a healthy food?",
    ],
)
def test_paper_reasoning_examples_stay_reasoning(question):
    assert matching_rules(question) == []
    assert classify(question) == "reasoning"


def test_case_and_punctuation_do_not_matter():
    assert matching_rules("HOW MANY  dogs") == [1]
    assert matching_rules("is this a banana") == [9]  # 4 words without '?'
