"""Number options of the trained models: hand-worked ranges, and one line through the CLI
naming the option before training starts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vqadiag.models.option_checks import (
    COUNT,
    DROPOUT,
    POSITIVE,
    RATE,
    SHARE,
    Number,
    check_divides,
    check_numbers,
)


@pytest.mark.parametrize(
    ("rule", "good", "bad", "said"),
    [
        (
            POSITIVE,
            [1, 7, np.int64(3)],
            [0, -1, 1.5, True, "3", None, 2.0**80],
            "a whole number of 1 or more",
        ),
        (COUNT, [0, 3], [-1, 0.5, False], "a whole number of 0 or more"),
        (
            RATE,
            [1e-3, 2, 10**400, np.float32(1e-3)],
            [0, -1e-3, math.nan, math.inf, "1e-3"],
            "a number above 0",
        ),
        (SHARE, [0, 0.2, 1, 1.0], [-0.1, 1.5, math.nan], "a number from 0 to 1"),
        (DROPOUT, [0, 0.5], [1, 1.0, -0.1], "a number from 0 to below 1"),
        (Number(none=True), [None, 3], [0], "a whole number of 1 or more, or null"),
        (
            Number(whole=False, low=0, high=2, low_open=True),
            [1, 2],
            [0, 2.5],
            "a number above 0 and at most 2",
        ),
    ],
)
def test_each_rule_admits_its_range_and_says_it(rule, good, bad, said):
    assert all(rule.admits(v) for v in good)
    assert not any(rule.admits(v) for v in bad)
    assert rule.describe() == said


def test_the_first_option_out_of_range_is_named_with_its_value():
    rules = {"batch_size": POSITIVE, "text_only": SHARE}
    check_numbers({"batch_size": 4, "text_only": 0.2, "other": -5}, rules)  # others: left alone
    said = r"^batch_size must be a whole number of 1 or more, not 0$"
    with pytest.raises(ValueError, match=said):
        check_numbers({"batch_size": 0, "text_only": 2}, rules)
    with pytest.raises(ValueError, match=r"^text_only must be a number from 0 to 1, not 'abc'$"):
        check_numbers({"text_only": "abc"}, rules)


def test_the_off_values_saved_runs_carry_are_admitted():
    from vqadiag.models.option_checks import TRAINING_NUMBERS

    # top_answers 0 or null: every answer; threads 0 or null: PyTorch's count; grad_clip
    # 0 or null: no clipping (TorchModel.load resolves a saved run's options again)
    for value in (0, None):
        check_numbers(
            {"top_answers": value, "threads": value, "grad_clip": value}, TRAINING_NUMBERS
        )


def test_heads_must_split_the_width():
    check_divides({"dim": 128, "heads": 4}, "dim", "heads")
    with pytest.raises(ValueError, match=r"dim \(128\) must be a multiple of heads \(3\)"):
        check_divides({"dim": 128, "heads": 3}, "dim", "heads")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vqadiag.synth import generate_world

    out = tmp_path_factory.mktemp("option_world") / "world"
    generate_world(out, images=12, seed=2)
    return out


@pytest.mark.parametrize(
    ("model", "option", "message"),
    [
        ("question-only", "batch_size=0", "batch_size must be a whole number of 1 or more, not 0"),
        ("question-only", "dropout=1", "dropout must be a number from 0 to below 1, not 1"),
        ("updn", "lr=0", "lr must be a number above 0, not 0"),
        ("updn", "top_answers=-1", "top_answers must be a whole number of 0 or more, or null"),
        ("pixel", "channels=0", "channels must be a whole number of 1 or more, not 0"),
        ("pixel", "token_supervision=-1", "token_supervision must be a number of 0 or more"),
        ("chat-vlm", "batch_size=0", "batch_size must be a whole number of 1 or more, not 0"),
        ("chat-vlm", "patch_size=0", "patch_size must be a whole number of 1 or more, not 0"),
        ("chat-vlm", "grad_clip=0", "grad_clip must be a number above 0, not 0"),
        ("chat-vlm", "text_only=1.5", "text_only must be a number from 0 to 1, not 1.5"),
        ("chat-vlm", "vision_heads=5", "vision_dim (128) must be a multiple of vision_heads (5)"),
        ("symbolic", "hidden=0", "hidden must be a whole number of 1 or more, not 0"),
        ("symbolic", "nms_iou=nan", "nms_iou must be a number from 0 to 1, not 'nan'"),
        ("symbolic", "relation_epochs=-3", "relation_epochs must be a whole number of 1 or more"),
        ("symbolic", "max_pairs=0", "max_pairs must be a whole number of 1 or more, not 0"),
    ],
)
def test_a_number_option_out_of_range_is_one_line_before_training(
    run_cli, world, tmp_path, model, option, message
):
    out = tmp_path / "run"
    got = run_cli("train", "--model", model, "--data", world, "--out", out, "-o", option)
    assert got.exit_code != 0
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --option: ") and message in lines[0]
    assert not out.exists()  # refused before the run folder is made


def test_a_seed_beyond_64_bits_is_one_line_naming_seed(run_cli, world, tmp_path):
    """Found in review: synth --seed 2**64 was a TypeError traceback from the JSON writer,
    and train --seed 10**20 an overflow blamed on --option."""
    for args in (
        ("synth", "--out", tmp_path / "w", "--images", "3", "--seed", str(2**64)),
        ("train", "--model", "prior", "--data", world, "--out", tmp_path / "r",
         "--seed", str(10**20)),
    ):  # fmt: skip
        got = run_cli(*args)
        assert got.exit_code == 2
        assert got.stderr.strip() == (
            "error: --seed: Input should be less than or equal to 9223372036854775807"
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"encoder": "grid", "crop_size": 32}, "crop_size: sizes the box encoder's crops"),
        ({"head": "grid", "token_supervision": 5.0}, "token_supervision: weighs the token"),
    ],
)
def test_a_pixel_option_its_encoder_or_head_never_reads_is_refused(options, message):
    """Found in review: recorded in config.json and the fingerprint, with weights equal
    to the defaults'. Given at its default it is taken."""
    from vqadiag.models.reference.pixel import PixelModel

    with pytest.raises(ValueError, match=message):
        PixelModel.training_options(options, None)
    key = next(k for k in options if k not in ("encoder", "head"))
    at_default = {**options, key: PixelModel.defaults[key]}
    assert PixelModel.training_options(at_default, None)[key] == PixelModel.defaults[key]
