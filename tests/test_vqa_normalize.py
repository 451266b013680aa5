"""The official VQA v2 answer normalization, quirk by quirk (docs/protocols.md §1 step 2)."""

from __future__ import annotations

import pytest

from vqadiag.metrics.vqa_normalize import (
    clean_whitespace,
    normalization_tables,
    normalize_answer,
    process_digit_article,
    process_punctuation,
)


def test_tables_are_the_official_sizes() -> None:
    tables = normalization_tables()
    assert len(tables["punctuation"]) == 21
    assert len(tables["contractions"]) == 120
    assert tables["articles"] == {"a", "an", "the"}
    assert tables["number_words"]["none"] == "0"
    assert tables["number_words"]["ten"] == "10"


def test_clean_whitespace_replaces_newline_and_tab_then_strips() -> None:
    assert clean_whitespace("  yes\n") == "yes"
    assert clean_whitespace("red\tcar") == "red car"
    assert clean_whitespace("\tblue  sky \n") == "blue  sky"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # no "p " / " p" and no digit,digit: p becomes a space
        ("t-shirt", "t shirt"),
        ("red/white", "red white"),
        ("yes!no", "yes no"),
        # "p " in the text: every p is deleted
        ("yes! no", "yes no"),
        ("red, blue", "red blue"),
        # " p" in the text: every p is deleted (also the ones not next to a space)
        ("t-shirt - red", "tshirt  red"),
        ("yes !", "yes "),
        # a comma between digits anywhere: every punctuation character is deleted
        ("1,000", "1000"),
        ("1,000-2,000", "10002000"),
        ("3,000 (about)", "3000 about"),
    ],
)
def test_punctuation_delete_or_space(text: str, expected: str) -> None:
    assert process_punctuation(text) == expected


def test_punctuation_rule_looks_at_the_original_text() -> None:
    # ';' is replaced first: "ab -cd-ef". Checked on that MODIFIED text, " -" would be found
    # and every '-' deleted ("ab cdef"); the official check uses the ORIGINAL text, where
    # neither "- " nor " -" occurs, so every '-' becomes a space.
    assert process_punctuation("ab;-cd-ef") == "ab  cd ef"
    assert normalize_answer("ab;-cd-ef") == "ab cd ef"


def test_period_is_deleted_unless_a_digit_follows() -> None:
    assert process_punctuation("Black.") == "Black"
    assert process_punctuation("3.5") == "3.5"
    assert process_punctuation("3.5.") == "3.5"
    assert process_punctuation("e.g.") == "eg"


def test_period_regex_lookbehind_is_malformed() -> None:
    # "(?!<=\d)" is a look-AHEAD for the text "<=digit", not a look-behind: a period after
    # a digit is still deleted when no digit follows.
    assert process_punctuation("5.a") == "5a"
    assert process_punctuation("5.") == "5"


def test_period_removal_stops_after_32() -> None:
    # re.UNICODE (= 32) is passed as the count of re.sub: 40 periods, 32 removed, 8 kept.
    text = "a." * 40
    assert process_punctuation(text) == "a" * 32 + "a." * 8


def test_number_words_become_digits() -> None:
    assert process_digit_article("two") == "2"
    assert process_digit_article("None") == "0"
    assert process_digit_article("zero") == "0"
    assert process_digit_article("ten") == "10"
    assert process_digit_article("eleven") == "eleven"
    assert process_digit_article("one two three") == "1 2 3"


def test_articles_are_dropped_after_number_mapping() -> None:
    assert process_digit_article("an apple") == "apple"
    assert process_digit_article("The Red Car") == "red car"
    assert process_digit_article("a one") == "1"
    assert process_digit_article("the") == ""


def test_contractions_are_mapped_after_lowercasing() -> None:
    assert process_digit_article("dont") == "don't"
    assert process_digit_article("Dont know") == "don't know"
    assert process_digit_article("whats") == "what's"
    # the table's capitalised keys never match: the text is lower-cased first
    assert process_digit_article("Im") == "im"


def test_whitespace_is_collapsed() -> None:
    assert process_digit_article("  big   red  ") == "big red"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Black.", "black"),
        (" Two\n", "2"),
        ("The dog's", "dog's"),
        ("an umbrella", "umbrella"),
        ("Yes!", "yes"),
        ("1,000", "1000"),
        ("(catch)", "catch"),
    ],
)
def test_normalize_answer_end_to_end(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected
