"""The code's shape (docs/contributing.md, "The map"): no import circle between modules,
each built-in protocol in its own folder. The layer and protocol-independence contracts
are import-linter's (pyproject.toml, run by scripts/test.sh)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import vqadiag

SRC = Path(vqadiag.__file__).parent
PROTOCOLS = ("vqa", "gqa", "ood", "fpvg", "importance", "robustness", "consistency")


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each an import circle)."""
    names = sorted(edges)
    index = {n: i for i, n in enumerate(names)}
    rows = [index[a] for a in names for b in edges[a] if b in index]
    cols = [index[b] for a in names for b in edges[a] if b in index]
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, label in zip(names, labels, strict=True):
        groups.setdefault(int(label), []).append(name)
    return [sorted(g) for g in groups.values() if len(g) > 1]


def test_import_cycles_finds_a_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(edges) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("vqadiag")
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert import_cycles(edges) == []


@pytest.mark.parametrize("name", PROTOCOLS)
def test_each_protocol_has_its_folder_with_a_suite(name):
    folder = SRC / "protocols" / name
    assert (folder / "__init__.py").is_file()
    assert (folder / "suite.py").is_file()
    from vqadiag.suites.base import BUILTIN_MODULES

    assert f"vqadiag.protocols.{name}.suite" in BUILTIN_MODULES


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in sorted(SRC.rglob("*.py"))]


def test_no_source_file_over_600_lines():
    long = {str(p.relative_to(SRC)): t.count("\n") for p, t in _sources() if t.count("\n") > 600}
    assert long == {}


def test_at_most_eight_functions_of_80_lines_or_more():
    long = sorted(
        (f.end_lineno - f.lineno + 1, f"{path.relative_to(SRC)}:{f.lineno} {f.name}")
        for path, text in _sources()
        for f in _functions(ast.parse(text))
        if f.end_lineno - f.lineno + 1 >= 80
    )
    assert len(long) <= 8, long


def test_no_class_is_defined_inside_a_function():
    """Networks are top-level nn.Modules built from a config (docs/contributing.md)."""
    inner = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.name}"
        for path, text in _sources()
        for f in _functions(ast.parse(text))
        for node in ast.walk(f)
        if isinstance(node, ast.ClassDef)
    ]
    assert inner == []


def test_a_protocol_names_its_summary_keys_in_its_own_folder():
    """FPVG+'s key is spelled where FPVG's formulas define it (and where importance names
    the FPVG groups it reports on), not across the engine."""
    spelled = {
        str(path.relative_to(SRC)) for path, text in _sources() if re.search(r"\bfpvg_plus\b", text)
    }
    assert len(spelled) <= 3, spelled
    assert all(p.startswith("protocols/") for p in spelled), spelled
