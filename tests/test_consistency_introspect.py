"""VQA-introspect reader: validation, deduplication, sub-question ids, VQA-style writer."""

from __future__ import annotations

import json

import pytest

from vqadiag.data.formats.introspect import read_introspect
from vqadiag.data.formats.vqa2 import read_vqa_annotations, read_vqa_questions
from vqadiag.errors import DataError
from vqadiag.protocols.consistency.score import write_vqa_style


def introspect_record(question="Is the banana ripe?", answer="yes", entries=None):
    return {
        "reasoning_question": question,
        "reasoning_answer_most_common": answer,
        "image_id": 7,
        "introspect": entries if entries is not None else [],
    }


def entry(q_type, *pairs):
    return {
        "pred_q_type": q_type,
        "sub_qa": [{"sub_question": q, "sub_answer": a} for q, a in pairs],
    }


@pytest.fixture
def sample(write_json):
    return write_json(
        "intro.json",
        {
            "565248001": introspect_record(
                entries=[
                    entry(
                        "reasoning", ("What color is the banana?", "yellow"), ("Is it green?", "no")
                    ),
                    # duplicate (question, answer) after lower-casing / whitespace → dropped
                    entry(
                        "reasoning",
                        ("what color is  the banana?", "Yellow"),
                        ("What color is the banana?", "green"),
                    ),  # other answer → kept
                    entry("invalid", ("nonsense?", "x")),
                    entry("perception", ("Is there a banana?", "yes")),
                ]
            ),
            "17": introspect_record("Is it safe?", "no"),
        },
    )


def test_ids_follow_dedup_order(sample):
    intro = read_introspect(sample)
    assert list(intro.mains) == ["565248001", "17"]
    main = intro.mains["565248001"]
    assert [(s.sub_id, s.question, s.answer) for s in main.subs] == [
        ("565248001_0", "What color is the banana?", "yellow"),
        ("565248001_1", "Is it green?", "no"),
        ("565248001_2", "What color is the banana?", "green"),
        ("565248001_3", "Is there a banana?", "yes"),
    ]
    assert intro.mains["17"].subs == ()
    assert list(intro.subs) == ["565248001_0", "565248001_1", "565248001_2", "565248001_3"]


def test_include_types(sample):
    intro = read_introspect(sample, include_types=("reasoning",))
    assert len(intro.subs) == 3  # the perception worker's sub-question is left out
    intro = read_introspect(sample, include_types=("reasoning", "perception", "invalid"))
    assert intro.subs["565248001_3"].question == "nonsense?"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"reasoning_answer_most_common": "yes", "image_id": 1, "introspect": []},
            "intro.json: record '5': missing field 'reasoning_question'",
        ),
        (introspect_record(question=3), "record '5': 'reasoning_question' must be a string"),
        (introspect_record(answer="  "), "record '5': 'reasoning_answer_most_common' is empty"),
        ({**introspect_record(), "introspect": {}}, "record '5': 'introspect' must be a list"),
        (
            introspect_record(entries=[{"pred_q_type": "maybe", "sub_qa": []}]),
            "record '5': introspect[0]: 'pred_q_type' must be one of reasoning, perception",
        ),
        (
            introspect_record(entries=[{"pred_q_type": "reasoning"}]),
            "record '5': introspect[0]: missing field 'sub_qa'",
        ),
        (
            introspect_record(
                entries=[{"pred_q_type": "reasoning", "sub_qa": [{"sub_question": "Is it?"}]}]
            ),
            "record '5': introspect[0].sub_qa[0]: missing field 'sub_answer'",
        ),
        (
            introspect_record(entries=[entry("reasoning", ("", "yes"))]),
            "record '5': introspect[0].sub_qa[0]: 'sub_question' is empty",
        ),
        ({**introspect_record(), "image_id": None}, "record '5': 'image_id' must be an integer"),
    ],
)
def test_bad_records(write_json, record, message):
    path = write_json("intro.json", {"5": record})
    with pytest.raises(DataError) as err:
        read_introspect(path)
    assert message in str(err.value)


def test_bad_files(write_json, tmp_path):
    with pytest.raises(DataError, match="intro.json: expected a JSON object"):
        read_introspect(write_json("intro.json", [1, 2]))
    with pytest.raises(DataError, match="no questions in file"):
        read_introspect(write_json("intro.json", {}))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(DataError, match="empty.json: file is empty"):
        read_introspect(empty)


def test_generated_id_clash(write_json):
    path = write_json(
        "intro.json",
        {
            "5": introspect_record(entries=[entry("reasoning", ("Is it?", "yes"))]),
            "5_0": introspect_record(),
        },
    )
    with pytest.raises(DataError, match="record '5_0': a sub-question id equals"):
        read_introspect(path)


def test_vqa_style_files_round_trip(sample, tmp_path):
    intro = read_introspect(sample)
    written = write_vqa_style(intro, tmp_path / "out")
    questions = read_vqa_questions(written["sub_questions"])
    assert list(questions) == list(intro.subs)
    assert questions["565248001_1"]["question"] == "Is it green?"
    annotations = read_vqa_annotations(written["sub_annotations"])
    assert annotations["565248001_0"]["answer_list"] == ["yellow"] * 10
    assert annotations["565248001_1"]["answer_type"] == "yes/no"
    mains = read_vqa_annotations(written["main_annotations"])
    assert mains["17"]["answer_list"] == ["no"] * 10
    index = json.loads((tmp_path / "out" / "sub_index.json").read_text())
    assert index == {sid: "565248001" for sid in intro.subs}


def test_written_answers_are_normalized(write_json, tmp_path):
    path = write_json(
        "intro.json",
        {
            "9": introspect_record(
                answer="Two", entries=[entry("reasoning", ("How many dogs?", "Two dogs."))]
            )
        },
    )
    written = write_vqa_style(read_introspect(path), tmp_path)
    main = read_vqa_annotations(written["main_annotations"])["9"]
    assert main["answer_list"][0] == "2" and main["answer_type"] == "number"
    # "Two dogs." → lower-case, period dropped, number word mapped → "2 dogs"
    assert read_vqa_annotations(written["sub_annotations"])["9_0"]["answer_list"][0] == "2 dogs"


def test_a_sub_question_keeps_its_program_when_the_file_gives_one(write_json):
    # a synthetic world's sub_qa entries carry ``semantic`` (docs/synth.md "Programs");
    # the official files have none; the program does not change ids or deduplication
    program = [
        {"operation": "select", "dependencies": [], "argument": "banana"},
        {"operation": "query", "dependencies": [0], "argument": "color"},
    ]
    first = {"sub_question": "What color is the banana?", "sub_answer": "yellow"}
    rec = introspect_record(
        entries=[
            {"pred_q_type": "perception", "sub_qa": [{**first, "semantic": program}]},
            {"pred_q_type": "perception", "sub_qa": [first]},  # duplicate: dropped
            {"pred_q_type": "perception", "sub_qa": [{"sub_question": "Is it?", "sub_answer": "no",
                                                      "semantic": "not a list"}]},
        ]
    )  # fmt: skip
    intro = read_introspect(write_json("prog.json", {"5": rec}))
    assert list(intro.subs) == ["5_0", "5_1"]
    assert list(intro.subs["5_0"].semantic) == program
    assert intro.subs["5_1"].semantic is None
