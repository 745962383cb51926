"""The course in Chinese is kept in step with the English (streamlab.stack.translations): every markdown cell of every
lesson and lab, and the learners' guide, has a translation of its current English; a change to the English without
its translation fails here, naming the cell; zh/ is what the translations make; a Chinese lab carries the English
lab's cells, grade ids and tests, so the grader takes it as it takes the English one."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from streamlab.grading.run.submissions import check_grade_cells
from streamlab.stack import translations

ROOT = Path(__file__).resolve().parents[1]
SOURCES = translations.sources()


def _id(source: Path) -> str:
    return str(source.relative_to(ROOT))


def test_every_english_text_has_its_translation():
    late = [line for source in SOURCES for line in translations.behind(source)]
    assert not late, ("English changed or added without its Chinese (`streamlab translate --stub FILE`, then translate "
                      "the blocks it marks and run `streamlab translate`):\n" + "\n".join(late))


def test_a_changed_english_cell_is_named(tmp_path, monkeypatch):
    """The test above can fail: one sentence changed in lesson 01's English, and its cell is named, with the English's
    first line; then the stub keeps every other block as translated and marks that one."""
    for relative in ("notebooks/01_stateless_vs_stateful.ipynb", "i18n/zh/notebooks/01_stateless_vs_stateful.md",
                     "requirements.txt"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    monkeypatch.setattr(translations, "project_root", lambda: tmp_path)
    lesson = tmp_path / "notebooks" / "01_stateless_vs_stateful.ipynb"
    assert translations.behind(lesson) == []
    notebook = json.loads(lesson.read_text(encoding="utf-8"))
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "markdown" and c["id"] != "c00")
    cell["source"] = ["".join(cell["source"]).replace("the", "a", 1)]
    lesson.write_text(json.dumps(notebook), encoding="utf-8")
    (late,) = translations.behind(lesson)
    assert late.startswith(f"notebooks/01_stateless_vs_stateful.ipynb cell {cell['id']} (") and "changed" in late
    before = translations.read_blocks(translations.translation_of(lesson))
    translations.stub(lesson)
    after = translations.read_blocks(translations.translation_of(lesson))
    assert translations.behind(lesson) == []  # the marker is new: the block now holds the English to translate
    changed = after[cell["id"]].text
    assert changed.startswith("".join(cell["source"])) and "the earlier English" in changed
    assert {k: b for k, b in after.items() if k != cell["id"]} == {k: b for k, b in before.items() if k != cell["id"]}


def _shape(text: str) -> dict:
    lines = text.split("\n")
    return {"table rows": sum(1 for line in lines if line.lstrip().startswith("|")),
            "fences": sum(1 for line in lines if line.lstrip().startswith("```")),
            "headings": [len(m.group(1)) for line in lines if (m := re.match(r"^(#+) ", line))],
            "link targets": sorted(re.findall(r"\]\(([^)\s]+)\)", text))}


def _cjk(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text))


@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_each_translation_is_chinese_with_the_english_structure(source):
    """Each block is Chinese (not the English left under a new marker), with the English's headings, tables, fenced
    blocks and link targets: a translation never drops a table row or a link."""
    english = translations.english_cells(source)
    blocks = translations.read_blocks(translations.translation_of(source))
    wrong = []
    for key, text in english.items():
        block = blocks[key].text
        if len(text.split()) > 3 and _cjk(block) <= _cjk(text):
            wrong.append(f"{key}: still English")
        if _shape(text) != _shape(block):
            wrong.append(f"{key}: {_shape(text)} / {_shape(block)}")
    assert not wrong, "\n".join(wrong)


def test_zh_is_what_the_translations_make():
    stale = [_id(source) for source in SOURCES
             if not translations.target_of(source).exists()
             or translations.target_of(source).read_text(encoding="utf-8") != translations.chinese_text(source)]
    assert not stale, f"zh/ is behind its sources: run `streamlab translate` ({stale})"


@pytest.mark.parametrize("lab", sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()))
def test_a_chinese_lab_is_the_english_lab_for_the_grader(lab):
    """Same cells, ids, types, code, grade ids and flags as the released English lab; only markdown text (and a locked
    markdown cell's checksum, as nbgrader computes it for the new text) differs; the grader's own check of a
    submission's cells passes it against the lab's source, and nbgrader's Validate finds no changed cell."""
    from nbgrader.utils import compute_checksum

    name = f"{lab}.ipynb"
    english = nbformat.read(ROOT / "labs" / lab / name, as_version=4)
    chinese = nbformat.read(ROOT / "zh" / "labs" / lab / name, as_version=4)
    assert [(c.id, c.cell_type) for c in chinese.cells] == [(c.id, c.cell_type) for c in english.cells]
    for zh, en in zip(chinese.cells, english.cells):
        if en.cell_type == "code":
            assert zh == en
        else:
            assert _cjk(zh.source) > _cjk(en.source)
            grading = zh.metadata.get("nbgrader", {})
            assert {k: v for k, v in grading.items() if k != "checksum"} == \
                {k: v for k, v in en.metadata.get("nbgrader", {}).items() if k != "checksum"}
            if "checksum" in grading:
                assert grading["checksum"] == compute_checksum(zh)
    assert check_grade_cells(chinese, nbformat.read(ROOT / "solutions" / lab / name, as_version=4)) is None


def test_links_lead_to_the_chinese_text_or_the_english_one():
    """A relative link in zh/ resolves to a file that exists: the Chinese lesson or guide where there is one."""
    broken, to_chinese = [], 0
    for source in SOURCES:
        target = translations.target_of(source)
        text = target.read_text(encoding="utf-8")
        cells = ["".join(c["source"]) for c in json.loads(text)["cells"]] if target.suffix == ".ipynb" else [text]
        for link in re.findall(r"\]\(([^)\s]+)\)", "\n".join(cells)):
            if re.match(r"^[a-z][a-z0-9+.-]*:|^#", link):
                continue
            pointed = (target.parent / link.split("#")[0]).resolve()
            to_chinese += (ROOT / "zh") in pointed.parents
            if not pointed.exists():
                broken.append(f"{_id(target)}: {link}")
    assert not broken, broken
    assert to_chinese > 10, "links between lessons stay in Chinese"


def test_the_self_check_compares_a_chinese_lab_with_the_chinese_lab():
    """`streamlab check` on a lab in Chinese names no locked cell as changed (it compared it with the English lab, and
    told the learner every translated instruction was a change of theirs); a learner's edit of one is still named."""
    from streamlab.grading.outputs.languages import language_of_bytes
    from streamlab.grading.selfcheck import changed_locked_cells, find_released, in_its_language

    for lab in sorted(p.name for p in (ROOT / "zh" / "labs").iterdir()):
        path = ROOT / "zh" / "labs" / lab / f"{lab}.ipynb"
        mine = nbformat.read(path, as_version=4)
        released, language = find_released(path, mine), language_of_bytes(path.read_bytes())
        assert released == ROOT / "labs" / lab / f"{lab}.ipynb", "graded from the English lab"
        assert in_its_language(released, language) == path
        assert changed_locked_cells(mine, nbformat.read(in_its_language(released, language), as_version=4)) == []
    locked = next(c for c in mine.cells if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("locked"))
    locked.source += "\n我的笔记"
    notes = changed_locked_cells(mine, nbformat.read(in_its_language(released, language), as_version=4))
    assert [n.split(":")[0] for n in notes] == [locked.metadata.nbgrader.grade_id]


def test_no_line_breaks_inside_a_chinese_sentence():
    """Markdown joins a paragraph's lines with a space, which Chinese does not have: a line break between two Chinese
    characters shows as a stray space in the middle of a sentence (in JupyterLab and on the site). Write a
    paragraph on one line, as the translations do."""
    cjk = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")
    starts_block = re.compile(r"^\s*(\||#|[-*+] |\d+[.)] |>|<!--|```)")
    found = []
    for path in sorted((ROOT / "i18n").rglob("*.md")):
        lines, fence = path.read_text(encoding="utf-8").split("\n"), False
        for number, (line, after) in enumerate(zip(lines, lines[1:]), 1):
            fence = fence != line.lstrip().startswith("```")
            joined = line.strip() and after.strip() and not starts_block.match(after)
            if (not fence and joined and not re.match(r"^\s*(\||#|<!--)", line)
                    and cjk.match(line[-1]) and cjk.match(after.lstrip()[0])):
                found.append(f"{path.relative_to(ROOT)}:{number}: ...{line[-12:]}")
    assert found == []
