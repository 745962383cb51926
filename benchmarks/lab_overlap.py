"""How much of each lab's answer a learner could copy from its lessons: the lab's answer lines found verbatim there.

    .venv/bin/python benchmarks/lab_overlap.py [LAB ...] [--lines] [--json FILE]

For each lab (every ``solutions/labNN_*/labNN_*.ipynb`` unless named; a name may be a prefix: ``lab02``) it reads

- the **answer lines**: the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in the lab's *code* cells
  that are not blank and not comments (a line whose first character is ``#``). Markdown answer cells (a written
  answer, nbgrader's ``solution`` on a Markdown cell) are not counted: only code can be copied line by line. The
  labs have none today; if one appears, its cells are named under the table.
- the **lesson lines**: every line of the code cells and of the fenced blocks (```) in Markdown cells of the
  module's lessons, ``notebooks/NN*_*.ipynb`` with the lab's two-digit number ``NN`` (lab02: ``02_keyed_state``
  and ``02b_state_expiry``; a new ``02c_...`` would count too), and the lessons with no lab of their own whose part
  the lab holds (``ALSO_PRACTISED``: lab03's Part D is lesson 08's).

Every line is compared **normalised**: a trailing comment removed (``x = 1  # why`` is ``x = 1``; a ``#`` inside a
string stays), the ends stripped, runs of spaces and tabs inside collapsed to one space. An answer line is
**ignored** when it is generic, i.e. anyone writes it without a lesson: shorter than 12 characters after normalising
(``return``, ``yield``, ``pass``, ``else:``, ``try:``, a lone bracket, ``i += 1``), a bare keyword statement with a
constant (``return None``, ``return iter([])``, ``except Exception:``, ``raise NotImplementedError()``), or an import
(``import pandas as pd``, ``from collections import Counter``). The others are **counted**; a counted line is
**verbatim** when its normalised text equals a normalised lesson line. Then

    share = verbatim lines / counted lines

per lab and per part (the grade id of each answer cell). A low share says the answer is not the lesson re-typed; it
does not say the problem is new (a renamed copy shares no line), so read the parts with the highest share first
(``--lines`` prints their verbatim lines). Reports numbers; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SHORTEST = 12  # characters: a shorter normalised line is generic (`return`, `yield`, `else:`, `]`, `i += 1`)
GENERIC = re.compile(r"""^(?:
      (?:return|yield)(?:\s+(?:None|True|False|-?\d+|iter\(\[\]\)|\[\]|\{\}|\(\)))?  # return None, return iter([])
    | raise(?:\s+\w+(?:\(\))?)? | pass | break | continue                 # raise NotImplementedError()
    | (?:else|try|finally)\s*:
    | except\b[\w\s.,()]*:                                             # except Exception:, except (A, B) as e:
    | import\s.+ | from\s+[\w.]+\s+import\s.+                          # imports
)$""", re.VERBOSE)
SPACES = re.compile(r"[ \t]+")


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside a string literal is kept)."""
    quote, i = None, 0
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = None
        elif char in "'\"":
            quote = line[i:i + 3] if line[i:i + 3] in ("'''", '"""') else char
            i += len(quote) - 1
        elif char == "#":
            return line[:i]
        i += 1
    return line


def normalise(line: str) -> str:
    """The line as it is compared: no trailing comment, stripped, inner runs of spaces collapsed."""
    return SPACES.sub(" ", strip_comment(line).strip())


def is_generic(normalised: str) -> bool:
    """Written the same by anyone, with or without the lesson (see the module's docstring)."""
    return len(normalised) < SHORTEST or bool(GENERIC.match(normalised))


def answer_lines(notebook: Path) -> tuple[dict[str, list[str]], list[str]]:
    """({grade id: the answer lines of its code cell, in order}, [grade ids of Markdown answer cells])."""
    nb = nbformat.read(notebook, as_version=4)
    parts: dict[str, list[str]] = {}
    markdown = []
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        name = meta.get("grade_id") or f"cell{index}"
        if cell.cell_type == "markdown" and meta.get("solution"):
            markdown.append(name)
            continue
        if cell.cell_type != "code" or BEGIN not in cell.source:
            continue
        inside = False
        for line in cell.source.splitlines():
            if line.strip().startswith(BEGIN):
                inside = True
            elif line.strip().startswith(END):
                inside = False
            elif inside and line.strip() and not line.strip().startswith("#"):
                parts.setdefault(name, []).append(line)
    return parts, markdown


def lesson_lines(lessons: list[Path]) -> set[str]:
    """The normalised non-blank lines of the lessons' code cells and of the fenced blocks of their Markdown."""
    lines: set[str] = set()
    for path in lessons:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                lines.update(normalise(line) for line in cell.source.splitlines())
            elif cell.cell_type == "markdown":
                fenced = False
                for line in cell.source.splitlines():
                    if line.lstrip().startswith("```"):
                        fenced = not fenced
                    elif fenced:
                        lines.add(normalise(line))
    lines.discard("")
    return lines


ALSO_PRACTISED = {"03": ["08"]}
"""{lab number: the numbers of lessons without a lab of their own, whose part that lab holds}."""


def lessons_of(lab: str, notebooks: Path) -> list[Path]:
    """The lessons of a lab's module: ``NN*_*.ipynb`` in ``notebooks`` for ``labNN_...`` (02 and 02b for lab02),
    and those of ``ALSO_PRACTISED``."""
    number = re.match(r"lab(\d\d)", lab).group(1)
    return sorted(p for n in (number, *ALSO_PRACTISED.get(number, ())) for p in notebooks.glob(f"{n}*_*.ipynb")
                  if re.match(rf"{n}[a-z]*_", p.name))


def _share(verbatim: int, counted: int) -> float | None:
    return round(100 * verbatim / counted, 1) if counted else None


def overlap(notebook: Path, lessons: list[Path]) -> dict:
    """The counts of one lab against its lessons: answer, ignored, counted and verbatim lines, the share in %,
    the same per part (grade id), and the verbatim lines themselves."""
    known = lesson_lines(lessons)
    parts, markdown = answer_lines(notebook)
    row = {"lab": notebook.stem, "lessons": [p.stem for p in lessons], "answer_lines": 0, "ignored": 0,
           "counted": 0, "verbatim": 0, "parts": {}, "markdown_answers_not_counted": markdown}
    for name, lines in parts.items():
        normalised = [normalise(line) for line in lines]
        counted = [line for line in normalised if not is_generic(line)]
        copied = [line for line in counted if line in known]
        row["parts"][name] = {"answer_lines": len(lines), "ignored": len(lines) - len(counted),
                              "counted": len(counted), "verbatim": len(copied),
                              "share_pct": _share(len(copied), len(counted)), "verbatim_lines": copied}
        for key in ("answer_lines", "ignored", "counted", "verbatim"):
            row[key] += row["parts"][name][key]
    row["share_pct"] = _share(row["verbatim"], row["counted"])
    return row


def _labs(names: list[str]) -> list[Path]:
    folders = sorted(p for p in (ROOT / "solutions").glob("lab[0-9][0-9]_*") if p.is_dir())
    if names:
        folders = [f for f in folders if any(f.name.startswith(Path(n).name) for n in names)]
    return [nb for folder in folders for nb in sorted(folder.glob(f"{folder.name}.ipynb"))]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labs", nargs="*", help="lab folders or their prefixes (lab02); every lab if none")
    parser.add_argument("--lines", action="store_true", help="also print each verbatim line under its part")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    print(f"{'lab':<32} {'answer':>6} {'ignored':>7} {'counted':>7} {'verbatim':>8} {'share %':>7}  "
          f"parts (verbatim/counted, share %)")
    for notebook in _labs(args.labs):
        row = overlap(notebook, lessons_of(notebook.stem, ROOT / "notebooks"))
        rows.append(row)
        parts = ", ".join(f"{name} {p['verbatim']}/{p['counted']} {_pct(p['share_pct'])}"
                          for name, p in row["parts"].items())
        print(f"{row['lab']:<32} {row['answer_lines']:>6} {row['ignored']:>7} {row['counted']:>7} "
              f"{row['verbatim']:>8} {_pct(row['share_pct']):>7}  {parts}")
        if row["markdown_answers_not_counted"]:
            print(f"{'':<32} Markdown answer cells, not counted: {', '.join(row['markdown_answers_not_counted'])}")
        if args.lines:
            for name, part in row["parts"].items():
                for line in part["verbatim_lines"]:
                    print(f"{'':<4}{name}: {line}")
    total = {k: sum(r[k] for r in rows) for k in ("answer_lines", "ignored", "counted", "verbatim")}
    print(f"{'all labs':<32} {total['answer_lines']:>6} {total['ignored']:>7} {total['counted']:>7} "
          f"{total['verbatim']:>8} {_pct(_share(total['verbatim'], total['counted'])):>7}")
    print("lessons compared: " + "; ".join(f"{r['lab'][:5]} {', '.join(r['lessons']) or 'none'}" for r in rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
