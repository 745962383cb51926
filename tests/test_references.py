"""Every reference to a section of a lesson ("07b §4", "module 02 §4", "Lesson 07b, section 4", "lesson 07b (section
2)", "section 3 of the lesson", and in a lesson a bare "section 6") names a section that lesson has: a heading
"## 4. ..." (or "### 3a. ..."). Where a title follows in italics ("section 4, *Changing parallelism*"), it is that
heading's title. Read in the lessons, the glossary and the labs' sources (solutions/): a lab's "the lesson" is the
lesson of its number."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = {p.stem.split("_")[0]: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))}
HEADING = re.compile(r"^#{2,3} (\d+[a-z]?)\. (.+)$", re.MULTILINE)

LESSON = r"(\d\d[a-z]?)"
SECTION = r"(\d+[a-z]?)"
TITLE = r"(?:,? \*([^*]+)\*)?"  # "section 4, *Changing parallelism*": the title the reference gives, if any
NAMED = [  # (pattern, its lesson group, its section group, its title group): the lesson is named
    (re.compile(rf"\b(?:[Ll]esson|[Mm]odule) {LESSON},? \(?[Ss]ection {SECTION}{TITLE}"), 1, 2, 3),
    (re.compile(rf"(?<![\w.]){LESSON} § ?{SECTION}{TITLE}"), 1, 2, 3),
    (re.compile(rf"\b[Ss]ection {SECTION}{TITLE} of (?:lesson|module) {LESSON}"), 3, 1, 2),
]
OF_THE_LESSON = re.compile(rf"\b[Ss]ection {SECTION}{TITLE} of the lesson\b")
BARE = re.compile(rf"\b[Ss]ections? {SECTION}(?: and {SECTION})?{TITLE}")


def _sections(path: Path) -> dict[str, str]:
    return {number: title for text in _markdown(path) for number, title in HEADING.findall(text)}


def _markdown(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def _plain(title: str) -> str:
    return re.sub(r"[`*_]", "", title).strip(" .:").lower()


def _documents() -> list[Path]:
    return [*LESSONS.values(), ROOT / "notebooks" / "glossary.md",
            *sorted((ROOT / "solutions").glob("lab[0-9][0-9]_*/lab[0-9][0-9]_*.ipynb"))]


def _own_lesson(path: Path) -> str | None:
    """The lesson a document's "the lesson" or bare "section K" means: a lesson itself, a lab the lesson of its
    number (lab07 -> 07); the glossary has none."""
    if path.parent.name == "notebooks":
        return path.stem.split("_")[0] if path.suffix == ".ipynb" else None
    return path.stem[3:5]


def _references(path: Path) -> list[tuple[str, str | None, str, str | None]]:
    """(the words as written, the lesson, the section, the title given) for every reference in a document."""
    found = []
    own = _own_lesson(path)
    for text in _markdown(path):
        text = re.sub(r"\s+", " ", text)
        for pattern, lesson, section, title in NAMED:
            for m in pattern.finditer(text):
                found.append((m.group(0), m.group(lesson), m.group(section), m.group(title)))
            text = pattern.sub("…", text)  # each reference read once: what is left may be bare
        for m in OF_THE_LESSON.finditer(text):
            found.append((m.group(0), own, m.group(1), m.group(2)))
        text = OF_THE_LESSON.sub("…", text)
        if path.parent.name == "notebooks" and own:  # a bare "section K" in a lesson is one of its own
            for m in BARE.finditer(text):
                for number in filter(None, (m.group(1), m.group(2))):
                    found.append((m.group(0), own, number, m.group(3)))
    return found


def test_the_patterns_read_the_forms_the_course_uses():
    text = ("(module 02 §4 says), (07b §4 shows), (Lesson 07b, section 4, *Changing parallelism*.), "
            "(lesson 07b (section 2)), section 5 of the lesson lists, (section 7 shows)")
    read = [(m.group(lesson), m.group(section), m.group(title))
            for pattern, lesson, section, title in NAMED for m in pattern.finditer(text)]
    assert read == [("07b", "4", "Changing parallelism"), ("07b", "2", None), ("02", "4", None), ("07b", "4", None)]
    assert [m.group(1) for m in OF_THE_LESSON.finditer(text)] == ["5"]
    assert _sections(LESSONS["07b"])["4"] == "Changing parallelism"


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_reference_to_a_lesson_section_names_one_it_has(path):
    broken = []
    for words, lesson, section, title in _references(path):
        if lesson not in LESSONS:
            broken.append(f"{words!r}: no lesson {lesson}")
            continue
        sections = _sections(LESSONS[lesson])
        if section not in sections:
            broken.append(f"{words!r}: lesson {lesson} has sections {sorted(sections)}, not {section}")
        elif title and _plain(title) != _plain(sections[section]):
            broken.append(f"{words!r}: lesson {lesson}'s section {section} is {sections[section]!r}")
    assert not broken, f"{path.relative_to(ROOT)}: " + "; ".join(broken)
