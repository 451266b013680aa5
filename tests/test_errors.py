"""``vqadiag.errors``: how a model's complaint about its options reaches the user."""

from __future__ import annotations

import pytest

from vqadiag.errors import DataError, option_errors


def test_option_errors_name_the_option_flag():
    positive = r"^--option: hidden_dim must be positive$"
    with pytest.raises(DataError, match=positive), option_errors():
        raise ValueError("hidden_dim must be positive")
    with pytest.raises(DataError, match=r"^--option: unexpected keyword 'gamma'$"), option_errors():
        raise TypeError("unexpected keyword 'gamma'")


def test_option_errors_keep_data_errors_and_other_kinds():
    original = DataError("q.json", "missing field 'question'", "record 'q1'")
    with pytest.raises(DataError) as caught, option_errors():
        raise original
    assert caught.value is original
    with pytest.raises(TypeError), option_errors(ValueError):  # only the kinds asked for
        raise TypeError("not an option problem")


def test_first_line_keeps_what_a_line_ending_in_a_colon_introduces():
    from vqadiag.errors import first_line

    assert first_line(ValueError("bad value\nTraceback detail")) == "bad value"
    assert first_line(OSError("\n  no such file  \n")) == "no such file"
    assert first_line(KeyError()) == "KeyError"
    tokenizer = (
        "Couldn't instantiate the backend tokenizer from one of: \n"
        "(1) a `tokenizers` library serialization file, \n"
        "(2) a slow tokenizer instance to convert."
    )
    trace = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'"
    assert first_line(RuntimeError(trace)) == "KeyError: 'a'"
    long = first_line(ValueError("one of:\n" + "x" * 5000))
    assert len(long) == 300 and long.endswith("…")
    assert first_line(ValueError(tokenizer)) == (
        "Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` library "
        "serialization file, (2) a slow tokenizer instance to convert."
    )
