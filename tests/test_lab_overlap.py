"""benchmarks/lab_overlap.py counts what it says: a tiny lab and its two lessons, written here, and the numbers."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def _lab_overlap():
    """benchmarks/lab_overlap.py (not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("lab_overlap", ROOT / "benchmarks" / "lab_overlap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answer(grade_id: str, source: str):
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade_id": grade_id, "solution": True}})


def _write(path: Path, cells) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_counts_answer_lines_found_verbatim_in_the_modules_lessons(tmp_path):
    lab_overlap = _lab_overlap()
    notebooks = tmp_path / "notebooks"
    _write(notebooks / "09_things.ipynb", [
        nbformat.v4.new_code_cell("counts = frame.groupBy('user').count()     # per user\n"
                                  "total   =   counts.agg(F.sum('count'))"),
        nbformat.v4.new_markdown_cell("Shown, not run:\n```python\nquery.awaitTermination(30)\n```\n"
                                      "prose = a line outside the fence, never code"),
    ])
    _write(notebooks / "09b_more.ipynb", [nbformat.v4.new_code_cell("state.update((count + 1,))")])
    _write(notebooks / "10_other.ipynb", [nbformat.v4.new_code_cell("url = 'http://a.b/#x'  # in lesson 10 only")])
    _write(notebooks / "091_not_this_module.ipynb", [nbformat.v4.new_code_cell("state.clear_everything()")])
    lab = _write(tmp_path / "solutions" / "lab09_things" / "lab09_things.ipynb", [
        nbformat.v4.new_markdown_cell("# Lab 09"),
        _answer("first", "def first(frame):\n"
                         "    ### BEGIN SOLUTION\n"
                         "    counts = frame.groupBy('user').count()\n"         # lesson 09, without its comment
                         "    # a comment: not an answer line\n"
                         "\n"
                         "    total = counts.agg(F.sum('count'))  # mine\n"    # lesson 09, spaces collapsed
                         "    prose = a line outside the fence, never code\n"  # Markdown prose: not a lesson line
                         "    import pandas as pd\n"                            # generic: an import
                         "    return None\n"                                    # generic: a constant returned
                         "    return x\n"                                       # generic: under 12 characters
                         "    ### END SOLUTION\n"
                         "    outside = 'the solution markers, never counted'"),
        _answer("second", "### BEGIN SOLUTION\n"
                          "query.awaitTermination(30)\n"                        # a fenced block of lesson 09
                          "state.update((count + 1,))\n"                        # lesson 09b
                          "state.clear_everything()\n"                          # lesson 091 is not module 09's
                          "url = 'http://a.b/#x'\n"                             # lesson 10's: another module
                          "### END SOLUTION"),
        nbformat.v4.new_markdown_cell("A written answer.", metadata={"nbgrader": {"grade_id": "essay",
                                                                                  "solution": True}}),
    ])
    lessons = lab_overlap.lessons_of(lab.stem, notebooks)
    assert [p.name for p in lessons] == ["09_things.ipynb", "09b_more.ipynb"]

    row = lab_overlap.overlap(lab, lessons)
    first, second = row["parts"]["first"], row["parts"]["second"]
    assert (first["answer_lines"], first["ignored"], first["counted"], first["verbatim"]) == (6, 3, 3, 2)
    assert first["verbatim_lines"] == ["counts = frame.groupBy('user').count()", "total = counts.agg(F.sum('count'))"]
    assert (second["answer_lines"], second["ignored"], second["counted"], second["verbatim"]) == (4, 0, 4, 2)
    assert first["share_pct"] == 66.7 and second["share_pct"] == 50.0
    assert (row["answer_lines"], row["ignored"], row["counted"], row["verbatim"], row["share_pct"]) == \
        (10, 3, 7, 4, 57.1)
    assert row["markdown_answers_not_counted"] == ["essay"]


def test_normalising_keeps_a_hash_inside_a_string_and_generic_lines_are_named():
    lab_overlap = _lab_overlap()
    assert lab_overlap.normalise("  a  =\t'#not a comment'   # a comment") == "a = '#not a comment'"
    assert lab_overlap.normalise('s = """#x""" + "#y"  # z') == 's = """#x""" + "#y"'
    generic = ["return", "else:", "]", "return iter([])", "except Exception:", "raise NotImplementedError()",
               "from collections import Counter"]
    assert all(lab_overlap.is_generic(line) for line in generic)
    specific = ["return clicks.groupBy('event_id')", "self.seen.update((True,))", "yield Row(user=key[0])"]
    assert not any(lab_overlap.is_generic(line) for line in specific)
