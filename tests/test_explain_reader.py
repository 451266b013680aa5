"""Reader of counter-example candidate files: shapes and errors naming file and record."""

from __future__ import annotations

from pathlib import Path

import pytest

from vqadiag.data.formats.pair_candidates import candidates_path, read_pair_candidates
from vqadiag.errors import DataError


def _good() -> dict:
    return {
        "1000": {"image_id": 1, "candidates": [5, 7, 9], "complement_image_id": 9},
        "2001": {"image_id": "2", "candidates": ["7", "1", "3"], "complement_image_id": "7"},
    }


def test_reads_ids_as_strings_with_complement_index(write_json) -> None:
    out = read_pair_candidates(write_json("c.json", _good()))
    assert list(out) == ["1000", "2001"]
    assert out["1000"].candidates == ("5", "7", "9")
    assert out["1000"].complement_index == 2  # 9 is the third candidate
    assert out["2001"].image_id == "2" and out["2001"].complement_index == 0


def test_default_path_of_a_world(tmp_path: Path) -> None:
    assert candidates_path(tmp_path, "val") == tmp_path / "synth_val2014_pair_candidates.json"
    assert candidates_path(tmp_path, "train2014").name == "synth_train2014_pair_candidates.json"


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d["1000"].pop("candidates"), "missing field 'candidates'"),
        (lambda d: d["1000"].pop("complement_image_id"), "missing field 'complement_image_id'"),
        (lambda d: d["1000"].update(candidates=[]), "non-empty list"),
        (lambda d: d["1000"].update(candidates=[5, 5, 9]), "lists an image twice"),
        (lambda d: d["1000"].update(candidates=[5, 1, 9]), "own image 1 is among"),
        (lambda d: d["1000"].update(complement_image_id=4), "complementary image 4 is not among"),
        (lambda d: d["1000"].update(candidates=[5, True, 9]), "a candidate must be an image id"),
        (lambda d: d["1000"].update(image_id=1.5), "'image_id' must be an image id"),
    ],
)
def test_bad_records_name_file_and_record(write_json, mutate, problem) -> None:
    data = _good()
    mutate(data)
    path = write_json("c.json", data)
    with pytest.raises(DataError) as err:
        read_pair_candidates(path)
    assert str(err.value).startswith(f"{path}: record '1000': ")
    assert problem in str(err.value)


def test_k_must_be_the_same(write_json) -> None:
    data = _good()
    data["2001"]["candidates"] = ["7", "3"]
    path = write_json("c.json", data)
    with pytest.raises(DataError, match=r"record '2001': has 2 candidates; record '1000' has 3"):
        read_pair_candidates(path)


def test_unknown_question_id(write_json) -> None:
    path = write_json("c.json", _good())
    with pytest.raises(DataError, match=r"c.json: record '2001': question id is not in"):
        read_pair_candidates(path, known_ids={"1000"})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "file is empty"),
        ("[1, 2]", "expected a JSON object"),
        ("{}", "no questions in file"),
        ('{"1000": {"image_id": NaN}}', "NaN/Infinity is not valid JSON"),
        ('{"1000": [1, 2]}', "record '1000': expected an object"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_pair_candidates(path)
    assert str(err.value).startswith(str(path)) and problem in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        read_pair_candidates(tmp_path / "nope.json")
