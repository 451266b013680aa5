"""Scene questions (``-o scene_questions=K``, docs/chat-vlm.md "Scene questions"): the
training split's attribute questions re-targeted to other objects of its scene graphs,
checked on hand-worked records and scenes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqadiag.models.reference.chat_vlm_data import question_words
from vqadiag.models.reference.chat_vlm_scene_questions import (
    SceneQuestions,
    Template,
    scene_questions,
    template,
)


def _record(question, operation, argument, answer, word=4, object_id="7", name="zebra"):
    return {
        "imageId": "1",
        "question": question,
        "answer": answer,
        "annotations": {"question": {str(word): object_id}, "answer": {}, "fullAnswer": {}},
        "semantic": [
            {"operation": "select", "dependencies": [], "argument": f"{name} ({object_id})"},
            {"operation": operation, "dependencies": [0], "argument": argument},
        ],
    }


QUERY = _record("What color is the zebra?", "query", "color", "white")
VERIFY = _record("Is the zebra black?", "verify color", "black", "no", word=2)
CHOOSE = _record("Is the zebra white or black?", "choose color", "white|black", "white", word=2)


def test_a_template_is_a_select_then_one_attribute_operation():
    assert template(QUERY) == Template("What color is the zebra?", 4, 5, "query", "color", ())
    assert template(VERIFY) == Template("Is the zebra black?", 2, 3, "verify", "color", ("black",))
    assert template(CHOOSE) == Template(
        "Is the zebra white or black?", 2, 3, "choose", "color", ("white", "black")
    )
    relate = {**QUERY, "semantic": [*QUERY["semantic"], {"operation": "query", "argument": "name"}]}
    place = _record("Which place is this?", "query", "place", "park")
    rel = _record("Is the zebra near the cat?", "verify rel", "cat,near,o (8)", "yes", word=2)
    untied = {**QUERY, "annotations": {"question": {"4": "99"}}}  # another object's words
    broken = {**QUERY, "annotations": {"question": {"x:4": "7"}}}
    chosen_badly = _record("Is the zebra white?", "choose color", "white", "white", word=2)
    outside = {**QUERY, "annotations": {"question": {"9": "7"}}}  # past the last word
    backwards = {**QUERY, "annotations": {"question": {"4:3": "7"}}}
    empty = _record("Is the zebra ?", "verify color", "", "no", word=2)
    twice = _record("Is the zebra white or white?", "choose color", "white|white", "white", word=2)
    unseen = _record("Is the chair wooden?", "verify material", "wood", "yes", word=2, name="chair")
    capital = _record("Wood or metal, what is the zebra made of?", "choose material",
                      "wood|metal", "wood", word=6)  # fmt: skip
    comma = _record("Which material is the zebra, wood or metal?", "choose material",
                    "wood|metal", "wood", word=4)  # fmt: skip
    pronoun = _record("What color is it?", "query", "color", "white", word=3)
    rejected = (relate, place, rel, untied, broken, chosen_badly, outside, backwards, empty,
                twice, unseen, capital, comma, pronoun, {"question": "?"})  # fmt: skip
    for record in rejected:
        assert template(record) is None, record["question"]


def test_categories_come_from_answers_and_arguments_and_names_from_the_scenes():
    scenes = {"1": {"objects": {"7": {"name": "zebra", "attributes": ["white", "standing"]}}}}
    learned = SceneQuestions.learn([QUERY, VERIFY, CHOOSE], scenes)
    assert set(learned.templates) == {("query", "color"), ("verify", "color"), ("choose", "color")}
    assert learned.category == {"white": "color", "black": "color"}
    assert learned.seen_with == {"zebra": frozenset({"white", "standing"})}


SCENE = {
    "objects": {
        "1": {"name": "traffic light", "attributes": ["red", "metal"]},
        "2": {"name": "cat", "attributes": ["black"]},
        "3": {"name": "cat", "attributes": ["white"]},  # two cats: neither is asked about
        "4": {"name": "cup", "attributes": ["clean"]},  # no category with templates
    }
}


def _only(*records):
    others = {"5": {"name": "traffic light", "attributes": ["green"]}}
    return SceneQuestions.learn(list(records), {"a": SCENE, "b": {"objects": others}})


def _span_text(record):
    ((span, object_id),) = record["annotations"]["question"].items()
    first, _, stop = span.partition(":")
    words = question_words(record["question"])
    stop_word = int(stop) if stop else int(first) + 1
    return record["question"][words[int(first)][0] : words[stop_word - 1][1]], object_id


def test_a_query_is_asked_about_the_one_object_with_a_unique_name_and_a_category():
    catalogue = _record("What color is the cat?", "query", "color", "red", name="cat")
    asked = _only(catalogue).ask("9", SCENE, 5, np.random.default_rng(0))
    assert len(asked) == 5
    for record in asked:
        assert record["answer"] == "red" and record["imageId"] == "9"
        assert record["question"] == "What color is the traffic light?"
        assert _span_text(record) == ("traffic light", "1")


def test_verify_asks_the_objects_attribute_or_another_its_name_is_seen_with():
    red = _record("Is the zebra red?", "verify color", "red", "yes", word=2)
    blue = _record("Is the zebra blue?", "verify color", "blue", "no", word=2)
    green = _record("Is the zebra green?", "verify color", "green", "no", word=2)
    asked = _only(red, green, blue, VERIFY).ask("9", SCENE, 40, np.random.default_rng(1))
    verified = {(r["question"], r["answer"]) for r in asked}
    # green is the one other colour a traffic light is seen with; blue and black never are
    assert verified == {("Is the traffic light red?", "yes"), ("Is the traffic light green?", "no")}
    assert all(_span_text(r) == ("traffic light", "1") for r in asked)


def test_choose_asks_the_objects_attribute_and_another_in_either_order():
    red_or_green = _record("Is the zebra red or green?", "choose color", "red|green", "red", word=2)
    asked = _only(red_or_green, CHOOSE).ask("9", SCENE, 40, np.random.default_rng(2))
    assert {(r["question"], r["answer"]) for r in asked} == {
        ("Is the traffic light red or green?", "red"),
        ("Is the traffic light green or red?", "red"),
    }


def test_attribute_words_are_swapped_in_one_pass():
    """The template's first attribute becomes the second one's word: a second pass would
    swap it back."""
    scene = {"objects": {"1": {"name": "dog", "attributes": ["black"]}}}
    learned = SceneQuestions.learn([CHOOSE], {"a": scene, "b": {"objects": {
        "2": {"name": "dog", "attributes": ["white"]}}}})  # fmt: skip
    asked = {r["question"] for r in learned.ask("9", scene, 20, np.random.default_rng(3))}
    assert asked == {"Is the dog white or black?", "Is the dog black or white?"}


def test_an_object_with_two_attributes_of_a_category_is_not_asked_about_it():
    red = _record("What color is the dog?", "query", "color", "red", name="dog")
    zebra = {"objects": {"1": {"name": "zebra", "attributes": ["black", "white"]}}}
    learned = SceneQuestions.learn([red, QUERY, VERIFY], {"a": zebra})
    assert learned.ask("9", zebra, 5, np.random.default_rng(0)) == []


def test_the_new_names_span_counts_words_as_annotations_do():
    spaced = _record("Is  the zebra black?", "verify color", "black", "no", word=3)
    red = _record("Is  the zebra red?", "verify color", "red", "yes", word=3)
    learned = _only(spaced, red)
    for record in learned.ask("9", SCENE, 10, np.random.default_rng(0)):
        assert _span_text(record) == ("traffic light", "1")


def test_choose_without_another_attribute_and_scenes_without_objects_ask_nothing():
    learned = SceneQuestions.learn([CHOOSE], {"a": SCENE})
    lonely = {"objects": {"1": {"name": "dog", "attributes": ["white", "black"]}}}
    assert learned.ask("9", lonely, 5, np.random.default_rng(0)) == []
    assert learned.ask("9", {"objects": {}}, 5, np.random.default_rng(0)) == []


def test_scene_questions_are_seeded_and_skip_images_without_a_scene_graph():
    scenes = {"1": SCENE, "2": SCENE}
    records = [
        QUERY,
        VERIFY,
        CHOOSE,
        _record("What color is the dog?", "query", "color", "red", name="dog"),
    ]
    first = scene_questions(records, scenes, ["1", "2", "3"], 3, seed=0)
    assert len(first) == 6 and {r["imageId"] for r in first} == {"1", "2"}
    assert first == scene_questions(records, scenes, ["1", "2", "3"], 3, seed=0)
    others = [scene_questions(records, scenes, ["1"], 8, s) for s in range(4)]
    assert len({json.dumps(o) for o in others}) > 1
    assert scene_questions([QUERY], scenes, ["1"], 0, seed=0) == []


@pytest.mark.parametrize("key", ["scene_questions", "caption_objects"])
@pytest.mark.parametrize("value", ["-1", "abc", "2.5", "true"])
def test_a_count_that_is_not_a_whole_number_from_0_is_refused(run_cli, tmp_path, key, value):
    from vqadiag.synth import generate_world

    pytest.importorskip("torch")
    world = tmp_path / "w"
    generate_world(world, images=6, seed=1, render=False)
    got = run_cli("train", "--model", "chat-vlm", "--data", world, "--out", tmp_path / "r",
                  "-o", f"{key}={value}", "--quiet")  # fmt: skip
    assert got.exit_code != 0 and f"{key} must be a whole number of 0 or more, not " in got.stderr
    assert not (tmp_path / "r").exists()
