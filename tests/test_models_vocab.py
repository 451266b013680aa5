"""Tokenizer, word and answer vocabularies (hand-worked cases)."""

from __future__ import annotations

import numpy as np
import pytest

from vqadiag.models.vocab import AnswerVocab, WordVocab, tokenize, vocab_config, words_from_config


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("Is the man's shirt RED?") == ["is", "the", "man's", "shirt", "red", "?"]
    assert tokenize("left,right;  up") == ["left", ",", "right", ";", "up"]
    assert tokenize("") == []


def test_word_vocab_orders_by_frequency_then_alphabet():
    # counts: b 3, a 1, c 1 -> b first, then a, c alphabetically
    vocab = WordVocab.build(["a b b", "b c"])
    assert vocab.words == ["<pad>", "<unk>", "b", "a", "c"]
    assert WordVocab.build(["a b b", "b c"], min_count=2).words == ["<pad>", "<unk>", "b"]


def test_word_vocab_encode_pads_truncates_and_marks_unknown():
    vocab = WordVocab(["<pad>", "<unk>", "b", "a"])
    ids, lengths = vocab.encode(["b a", "zzz", ""])
    # "b a" -> [2, 3]; "zzz" unknown -> [1]; "" -> one <unk> so the length is never 0
    assert ids.tolist() == [[2, 3], [1, 0], [1, 0]]
    assert lengths.tolist() == [2, 1, 1]
    ids, lengths = vocab.encode(["b a b a"], max_len=3)
    assert ids.tolist() == [[2, 3, 2]] and lengths.tolist() == [3]
    assert ids.dtype == np.int64


def test_word_vocab_round_trips_through_config():
    vocab = WordVocab.build(["what color is it"])
    assert words_from_config(vocab_config(vocab, 30)).words == vocab.words
    with pytest.raises(ValueError, match="starts with"):
        WordVocab(["a", "b"])


def test_answer_vocab_frequency_order_top_k_and_no_unk():
    answers = ["no", "yes", "yes", "red", "no", "blue"]
    # yes 2, no 2 (tie -> alphabetical: no, yes), then blue 1, red 1
    vocab = AnswerVocab.build(answers)
    assert vocab.answers == ["no", "yes", "blue", "red"]
    top = AnswerVocab.build(answers, top_k=2)
    assert top.answers == ["no", "yes"]
    # answers outside the vocabulary are ignored by the loss, never mapped to an <unk> class
    assert top.encode(["yes", "red", "blue"]).tolist() == [1, -100, -100]
    assert "<unk>" not in vocab.answers
    with pytest.raises(ValueError, match="duplicates"):
        AnswerVocab(["a", "a"])
