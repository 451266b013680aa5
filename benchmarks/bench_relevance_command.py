"""Benchmark: the whole ``vqadiag relevance`` command against an official-style program,
both run as a user runs them (a subprocess each, file reading and writing included, peak
memory from the operating system), on files laid out as FPVG's inputs at GQA balanced
val's size.

    python benchmarks/bench_relevance_command.py               # 131,989 (132,000 in whole images)
    python benchmarks/bench_relevance_command.py --size 10000  # quick

Inputs (docs/fpvg.md): a GQA questions file whose records have every field of the real
ones (``bench_gqa_loading``'s records, with ``imageId`` and ``annotations`` pointing at
the scene objects), the scene graphs of the same images (16 objects each, with
attributes and relations, as GQA's), and 100 detected box slots per image (about 91
real) in the GQA features layout (``gqa_objects_info.json`` + ``gqa_objects_<k>.h5``).

The official-style program does what FPVG's ``get_object_relevance.py`` does, written
from its algorithm (docs/fpvg.md): ``json.load`` of the questions and scene graphs, the
boxes read from the h5 files image by image, the per-box loop with the official idioms
(``bench_relevance.per_box_loop(official_port=True)``), and ``json.dump`` of the same
``R.json`` contract. Both outputs must hold the same relevant / irrelevant boxes and
exclusions; the script prints wall time and peak RSS of each and their ratios (issue
target: vqadiag ≥ 10× faster, in no more memory).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gqa_loading import _group_bias, _record  # noqa: E402
from bench_relevance import generate, write_gqa_layout  # noqa: E402
from bench_score_vqa_command import measure, print_comparison  # noqa: E402

OFFICIAL_STYLE = r"""
import json, sys
import h5py
sys.path.insert(0, sys.argv[5])
from bench_relevance import per_box_loop
questions = json.load(open(sys.argv[1]))
scenes = json.load(open(sys.argv[2]))
info = json.load(open(sys.argv[3]))
folder = sys.argv[3].rsplit("/", 1)[0]
files = {}
detections = {}
for image_id in {q["imageId"] for q in questions.values()}:
    entry = info[image_id]
    if entry["file"] not in files:
        files[entry["file"]] = h5py.File(f"{folder}/gqa_objects_{entry['file']}.h5", "r")
    detections[image_id] = files[entry["file"]]["bboxes"][entry["idx"]][: entry["objectsNum"]]
sets, excluded = per_box_loop(questions, scenes, detections, official_port=True)
out = {}
for qid in questions:
    rel, irrel = sets.get(qid, ([], []))
    record = {"relevant": rel, "irrelevant": irrel}
    if qid in excluded:
        record["excluded"] = excluded[qid]
    out[qid] = record
json.dump(out, open(sys.argv[4], "w"))
print(json.dumps({"n_kept": len(questions) - len(excluded)}))
"""

ATTRIBUTES = ["white", "black", "wooden", "metal", "large", "small", "standing", "green"]
RELATIONS = ["to the left of", "to the right of", "behind", "in front of", "near", "on"]


def write_inputs(folder: Path, size: int, boxes: int, seed: int) -> tuple[Path, Path, Path]:
    """Questions, scene graphs and the h5 detections of ``size`` questions (rounded down to
    whole images: ``bench_relevance.generate``)."""
    questions, scenes, detections = generate(size, boxes, seed)
    rng = random.Random(seed)
    bias = _group_bias(seed)
    full = {}
    for i, (qid, thin) in enumerate(questions.items()):
        record = json.loads("{" + _record(rng, i, len(questions), bias) + "}").popitem()[1]
        record.update(imageId=thin["imageId"], annotations=thin["annotations"])
        full[qid] = record
    for scene in scenes.values():
        ids = list(scene["objects"])
        for obj in scene["objects"].values():
            obj["attributes"] = rng.sample(ATTRIBUTES, rng.randint(0, 3))
            obj["relations"] = [{"name": rng.choice(RELATIONS), "object": rng.choice(ids)}
                                for _ in range(rng.randint(2, 6))]  # fmt: skip
    paths = folder / "val_balanced_questions.json", folder / "val_sceneGraphs.json"
    paths[0].write_text(json.dumps(full))
    paths[1].write_text(json.dumps(scenes))
    info = write_gqa_layout(folder, detections)
    return paths[0], paths[1], info


def _relevance_sets(path: Path) -> dict:
    return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=132_000, help="Questions in the file.")
    parser.add_argument("--boxes", type=int, default=100, help="Detected box slots per image.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        questions, scenes, info = write_inputs(folder, args.size, args.boxes, args.seed)
        h5_mb = sum(p.stat().st_size for p in folder.glob("*.h5")) / 1e6
        print(f"questions {questions.stat().st_size / 1e6:.0f} MB; scene graphs "
              f"{scenes.stat().st_size / 1e6:.0f} MB; boxes {h5_mb:.0f} MB of h5")  # fmt: skip
        script = folder / "official_style.py"
        script.write_text(OFFICIAL_STYLE)
        official_out, ours_out = folder / "R_official.json", folder / "R_vqadiag.json"
        official = measure([sys.executable, str(script), str(questions), str(scenes), str(info),
                            str(official_out), str(HERE)])  # fmt: skip
        ours = measure([sys.executable, "-m", "vqadiag", "relevance", "--questions",
                        str(questions), "--scenes", str(scenes), "--detections", str(info),
                        "--out", str(ours_out), "--json", "--quiet"])  # fmt: skip
        if _relevance_sets(official_out) != _relevance_sets(ours_out):
            raise SystemExit("the two R.json files differ")
        summary = json.loads(ours["stdout"])
        print(f"identical R.json ({summary['n_kept']:,} of {summary['n_questions']:,} "
              "questions kept)")  # fmt: skip
        print_comparison("vqadiag relevance", official, ours, target=10)


if __name__ == "__main__":
    main()
