"""The course in Simplified Chinese, kept in step with the English.

One source of code: a translation holds only text. A notebook's translation (a lesson, or a lab's source in
solutions/) is ``i18n/zh/<the notebook's path>.md``, one block per markdown cell, each opened by the cell's id and a
hash of the English it translates::

    <!-- cell c00 · en 32279dd12da6 -->
    # 01 · 无状态与有状态

A Markdown text (the learners' guide) is translated whole, under one such line at its top. ``behind`` says what needs
work: a cell whose English changed since it was translated (the hash differs), a cell with no translation, a block
whose cell is gone. ``build`` writes the course in Chinese into ``zh/``: each lesson and each released lab is the
English notebook with its markdown cells' text replaced and every code cell as it is (the labs' grade ids, tests and
locked cells too, so the grader and ``streamlab check`` take a Chinese lab as they take the English one), and the
learners' guide; links to a text that has a translation point to it, the others to the English.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .paths import project_root

LANGUAGE = "zh"
NAME = "简体中文"
CELL = re.compile(r"^<!-- cell (\S+) · en ([0-9a-f]{12}) -->$")
WHOLE = re.compile(r"^<!-- (\S+) in Simplified Chinese · en ([0-9a-f]{12}) -->$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def display_width(text: str) -> int:
    """The columns ``text`` takes in a terminal: a Chinese character (and any other wide one) takes two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def english_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def sources() -> list[Path]:
    """The English texts the course translates: every lesson, every lab's source notebook, the learners' guide."""
    root = project_root()
    return [*sorted((root / "notebooks").glob("*.ipynb")), *sorted((root / "solutions").glob("*/*.ipynb")),
            root / "docs" / "learners.md"]


def translation_of(source: Path) -> Path:
    """``i18n/zh/<source's path under the project>.md``."""
    root = project_root()
    return root / "i18n" / LANGUAGE / Path(source).resolve().relative_to(root).with_suffix(".md")


@dataclass(frozen=True)
class Block:
    key: str          # the markdown cell's id, or the text's path for a whole Markdown text
    en_hash: str      # the hash of the English it translates
    text: str


def read_blocks(path: Path) -> dict[str, Block]:
    """The blocks of a translation file, by cell id (a whole text's one block by its path)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    whole = WHOLE.match(lines[0])
    if whole:
        return {whole.group(1): Block(whole.group(1), whole.group(2), "\n".join(lines[1:]))}
    blocks, key, mark, body = {}, None, "", []
    for line in [*lines[1:], "<!-- cell <end> · en 000000000000 -->"]:
        found = CELL.match(line)
        if not found:
            body.append(line)
            continue
        if key is not None:
            blocks[key] = Block(key, mark, "\n".join(body).strip("\n"))
        key, mark, body = found.group(1), found.group(2), []
    return blocks


def english_cells(source: Path) -> dict[str, str]:
    """{cell id: English Markdown} of a notebook's markdown cells, in order; a Markdown text: {its path: the text}."""
    source = Path(source)
    if source.suffix != ".ipynb":
        return {str(source.resolve().relative_to(project_root())): source.read_text(encoding="utf-8")}
    notebook = json.loads(source.read_text(encoding="utf-8"))
    return {cell["id"]: "".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"}


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.split("\n") if line.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def behind(source: Path) -> list[str]:
    """What the translation of ``source`` lacks, one line each, naming the cell and its English's first line."""
    source = Path(source)
    where = source.resolve().relative_to(project_root())
    path = translation_of(source)
    if not path.exists():
        return [f"{where}: no translation ({path.relative_to(project_root())}): "
                f"`streamlab translate --stub` starts one"]
    english, blocks = english_cells(source), read_blocks(path)
    found = []
    for key, text in english.items():
        block = blocks.get(key)
        if block is None:
            found.append(f"{where} cell {key} ({_first_line(text)!r}): not translated yet")
        elif block.en_hash != english_hash(text):
            found.append(f"{where} cell {key} ({_first_line(text)!r}): the English changed since it was translated "
                         f"(its block says en {block.en_hash}, the English is now {english_hash(text)})")
    found += [f"{where} cell {key}: translated, but the notebook has no such markdown cell" for key in blocks
              if key not in english]
    return found


def stub(source: Path) -> Path:
    """Write the translation file of ``source`` for a translator: the blocks already translated and up to date as
    they are; a new or changed cell as its English under a marker with the new hash, followed by the old translation
    (if any) in a comment to start from. Returns the file."""
    path = translation_of(source)
    blocks = read_blocks(path) if path.exists() else {}
    english = english_cells(source)
    where = Path(source).resolve().relative_to(project_root())
    if Path(source).suffix != ".ipynb":
        ((key, text),) = english.items()
        old = blocks.get(key)
        body = old.text if old and old.en_hash == english_hash(text) else text
        content = f"<!-- {key} in Simplified Chinese · en {english_hash(text)} -->\n{body}"
    else:
        parts = [f"<!-- {where} in Simplified Chinese: one block per markdown cell, opened by the cell's id and a "
                 f"hash of the English it translates -->", ""]
        for key, text in english.items():
            old = blocks.get(key)
            if old and old.en_hash == english_hash(text):
                parts += [f"<!-- cell {key} · en {old.en_hash} -->", old.text, ""]
            else:
                parts += [f"<!-- cell {key} · en {english_hash(text)} -->", text, ""]
                if old:
                    parts += ["<!-- the translation of the earlier English, to start from:", old.text, "-->", ""]
        content = "\n".join(parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


# -- the course in Chinese, built from the English and the translations --------------------------------------------

def target_of(source: Path) -> Path:
    """Where the Chinese version of an English text goes under ``zh/``: a lesson in zh/notebooks/, a lab's source
    (solutions/<lab>/) as its released notebook in zh/labs/<lab>/, the learners' guide in zh/docs/."""
    root = project_root()
    relative = Path(source).resolve().relative_to(root)
    if relative.parts[0] == "solutions":
        relative = Path("labs", *relative.parts[1:])
    return root / LANGUAGE / relative


def _english_of(source: Path) -> Path:
    """The English file a Chinese one is made from: a lab's released notebook (labs/), not its solution."""
    relative = Path(source).resolve().relative_to(project_root())
    if relative.parts[0] == "solutions":
        return project_root() / "labs" / Path(*relative.parts[1:])
    return Path(source)


def _relink(text: str, english: Path, target: Path, translated: set[Path]) -> str:
    """Relative links of ``english``'s text, made to work from ``target``: to the Chinese version of a translated
    text, else to the English one."""
    def fix(match: re.Match) -> str:
        link = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", link):
            return match.group(0)
        path, _, anchor = link.partition("#")
        pointed = (english.parent / path).resolve()
        if pointed in translated:
            pointed = target_of(pointed)
        moved = os.path.relpath(pointed, target.parent) + (f"#{anchor}" if anchor else "")
        return f"]({moved})"
    return LINK.sub(fix, text)


def _translated() -> set[Path]:
    """The English files that have a Chinese version: every source, and each lab's released notebook."""
    found = set()
    for source in sources():
        found |= {source.resolve(), _english_of(source).resolve()}
    return found


def in_chinese(notebook: dict, source: Path) -> dict:
    """``notebook`` (a dict, as JSON holds it: ``source``'s own English notebook, or a lab's released notebook, or a
    student's copy of it) with each markdown cell translated from ``source``'s translation, in place; code cells, ids
    and grade ids untouched. A lab's locked markdown cell gets the checksum nbgrader computes for its new text, so
    that nbgrader's Validate takes it as the lab's own."""
    from nbformat import from_dict
    from nbgrader.utils import compute_checksum

    english, target, translated = _english_of(source), target_of(source), _translated()
    blocks = read_blocks(translation_of(source))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("id") in blocks:
            text = _relink(blocks[cell["id"]].text, english, target, translated)
            cell["source"] = text.splitlines(keepends=True)
            grading = cell.get("metadata", {}).get("nbgrader", {})
            if "checksum" in grading:  # as nbgrader reads the cell: its source one string
                grading["checksum"] = compute_checksum(from_dict({**cell, "source": text}))
    notebook["metadata"]["streamlab"] = {"language": LANGUAGE}
    return notebook


def chinese_text(source: Path) -> str:
    """The Chinese version of ``source`` as ``build`` writes it (a notebook as JSON)."""
    source = Path(source)
    english = _english_of(source)
    if source.suffix != ".ipynb":
        (block,) = read_blocks(translation_of(source)).values()
        return _relink(block.text, english, target_of(source), _translated())
    notebook = in_chinese(json.loads(english.read_text(encoding="utf-8")), source)
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


def build() -> list[Path]:
    """Write the course in Chinese into zh/ (every source's Chinese version). Returns the files written."""
    written = []
    for source in sources():
        target = target_of(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(chinese_text(source), encoding="utf-8")
        written.append(target)
    return written
