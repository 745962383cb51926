"""The modules of streamlab import each other without a circle, so each can be read (and tested) from
the bottom up, room by room: the stack (paths and java, then jars, broker, kafka, session, ..., the
doctor), then the lessons' helpers, then the grader, with the CLI and ``import streamlab`` on top.

The graph is read from the source (AST), not by importing, by the package's own reader
(``streamlab.grading.run.imports``, which the grader's version also reads): every ``from .x import y``,
``from . import x``, ``import streamlab.x`` and ``from streamlab.x import y`` counts, at the top of a
module or inside a function, in subpackages too (``streamlab/grading/``).

And the package imports its own modules at the top, never inside a function: an import tucked into
a function hides a dependency from the reader (and is how the old circle was held together). Only
heavy third-party packages (pyspark, pandas, nbgrader, matplotlib, kafka ...) are imported inside
functions, so that ``import streamlab`` stays light.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from streamlab.grading.run.imports import import_graph, imported, module_files

PACKAGE = Path(__file__).resolve().parents[1] / "streamlab"


def imports_inside_functions(root: Path) -> list[str]:
    """Every import of a package module inside a function (or a lambda), as
    ``"pkg/file.py:line imports pkg.module inside a function"``; imports at module level (also
    under a module-level ``if`` or ``try``) and imports of other packages are fine."""
    files = module_files(root)
    known = set(files)
    found = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        functions = [node for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
        nested = {id(inner) for function in functions for inner in ast.walk(function) if inner is not function}
        for node in ast.walk(tree):
            if id(node) in nested and isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in sorted(imported(module, is_package, node, known)):
                    found.append((str(path.relative_to(root.parent)), node.lineno, target))
    return [f"{where}:{line} imports {target} inside a function" for where, line, target in sorted(found)]


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per group of modules that import each other (Tarjan's strongly connected
    components), each as a path that ends where it starts: ['a', 'b', 'a']."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(component, graph) for component in components]


def _cycle_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A concrete circle inside one strongly connected component, starting at its first module."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:  # breadth-first: the shortest way back to the start
        node = queue.pop(0)
        for succ in sorted(graph.get(node, ())):
            if succ == start:
                return paths[node] + [start]
            if succ in members and succ not in paths:
                paths[succ] = paths[node] + [succ]
                queue.append(succ)
    raise AssertionError(f"no circle through {component}")


# --- the package -------------------------------------------------------------------------------

def test_the_package_has_no_import_circles():
    graph = import_graph(PACKAGE)
    assert {"streamlab.stack.kafka", "streamlab.stack.broker", "streamlab.stack.doctor", "streamlab.stack.java",
            "streamlab.lessons.events", "streamlab.grading.run.grader"} <= set(graph)
    cycles = find_cycles(graph)
    assert not cycles, "import circles in streamlab/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_package_imports_its_own_modules_at_the_top():
    found = imports_inside_functions(PACKAGE)
    assert not found, ("move these imports to the top of their module; if that makes a circle, the "
                       "modules are in the wrong layers:\n" + "\n".join(found))


def test_the_layers_the_course_relies_on():
    graph = import_graph(PACKAGE)
    assert "streamlab.stack.kafka" not in graph["streamlab.stack.broker"], "broker sits below kafka"
    assert "streamlab.stack.broker" in graph["streamlab.stack.kafka"]
    assert "streamlab.stack.doctor" not in graph["streamlab.stack.broker"] | graph["streamlab.stack.jars"], \
        "Java checks live in streamlab.stack.java, below everything"
    assert graph["streamlab.stack.java"] == set() and graph["streamlab.stack.paths"] == set()
    site = {target for module, targets in graph.items() if room_of(module) == "site" for target in targets}
    assert {room_of(target) for target in site} <= {"site", "stack"}, "the site builder needs no lesson or grader"


ROOMS = ("stack", "lessons", "grading", "site")  # lowest first: a room imports only itself and the rooms below


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower room into a higher one (the CLI and the top package are above all rooms)."""
    found = []
    for module, targets in sorted(graph.items()):
        here = room_of(module)
        for target in sorted(targets):
            there = room_of(target)
            if here and (there is None or ROOMS.index(there) > ROOMS.index(here)):
                found.append(f"{module} imports {target}")
    return found


def test_lower_rooms_never_import_higher_ones():
    """The stack imports nothing from the lessons or the grader; the lessons nothing from the grader;
    no room imports the CLI or the package's top (``streamlab/__init__.py``)."""
    graph = import_graph(PACKAGE)
    assert {room_of(m) for m in graph} == {*ROOMS, None}
    found = upward_imports(graph)
    assert not found, "lower rooms import higher ones:\n" + "\n".join(found)


def test_an_upward_import_is_caught(tmp_path):
    copy = tmp_path / "streamlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    session = copy / "stack" / "session.py"
    session.write_text(session.read_text() + "\nfrom ..lessons.events import access_log  # noqa\n")
    assert upward_imports(import_graph(copy)) == ["streamlab.stack.session imports streamlab.lessons.events"]


# --- the detector itself -----------------------------------------------------------------------

def test_detector_finds_a_circle_in_a_synthetic_graph():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert sorted(find_cycles(graph)) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_detector_reads_every_import_form(tmp_path):
    """A synthetic package whose circles hide inside a function, behind `from . import`, in a
    subpackage and behind an absolute import."""
    pkg = _write(tmp_path / "pkg", {
        "__init__.py": "from .low import helper\n",
        "low.py": "import os\n\ndef helper():\n    from .high import top\n    return top()\n",
        "high.py": "from . import low\n\ndef top():\n    return 1\n",
        "sub/__init__.py": "",
        "sub/inner.py": "from ..high import top\nfrom . import other\n",
        "sub/other.py": "import pkg.sub.inner\n",
        "plain.py": "from pkg.high import top\nimport json\n",
    })
    graph = import_graph(pkg)
    assert graph == {
        "pkg": {"pkg.low"}, "pkg.low": {"pkg.high"}, "pkg.high": {"pkg.low"}, "pkg.sub": set(),
        "pkg.sub.inner": {"pkg.high", "pkg.sub.other"}, "pkg.sub.other": {"pkg.sub.inner"},
        "pkg.plain": {"pkg.high"},
    }
    assert sorted(find_cycles(graph)) == [["pkg.high", "pkg.low", "pkg.high"],
                                          ["pkg.sub.inner", "pkg.sub.other", "pkg.sub.inner"]]


def test_a_circle_put_back_into_streamlab_fails(tmp_path):
    """The old circle (broker imported require_java from the doctor, which imports broker) is caught."""
    copy = tmp_path / "streamlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    broker = copy / "stack" / "broker.py"
    broker.write_text(broker.read_text() + "\n\ndef _java():\n    from .doctor import diagnose\n")
    cycles = find_cycles(import_graph(copy))
    assert ["streamlab.stack.broker", "streamlab.stack.doctor", "streamlab.stack.broker"] in cycles


def test_imports_inside_functions_are_found(tmp_path):
    """A synthetic package: package modules imported inside functions and methods, in every form,
    are reported; module-level imports (also under `try`/`if`) and third-party ones are not."""
    pkg = _write(tmp_path / "pkg", {
        "__init__.py": "from .low import helper\n",
        "low.py": "import json\n\ntry:\n    from .high import top\nexcept ImportError:\n    top = None\n\n"
                  "def helper():\n    import pandas\n    from . import high\n    return high, pandas\n",
        "high.py": "def top():\n    return 1\n",
        "sub/__init__.py": "",
        "sub/inner.py": "class A:\n    def method(self):\n        from ..low import helper\n        import pkg.high\n"
                        "        return helper, pkg.high\n\nf = lambda: __import__('os')\n",
    })
    assert imports_inside_functions(pkg) == [
        "pkg/low.py:10 imports pkg.high inside a function",
        "pkg/sub/inner.py:3 imports pkg.low inside a function",
        "pkg/sub/inner.py:4 imports pkg.high inside a function",
    ]


def test_an_import_put_back_into_a_function_fails(tmp_path):
    """The rule catches the pattern it replaced: a sibling imported inside a function."""
    copy = tmp_path / "streamlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    events = copy / "lessons" / "events.py"
    lines = events.read_text().splitlines()
    events.write_text("\n".join(lines) + "\n\n\ndef _produce(topic, rows):\n    from ..stack.kafka import produce\n\n"
                      "    produce(topic, rows)\n")
    put_back = f"streamlab/lessons/events.py:{len(lines) + 4} imports streamlab.stack.kafka inside a function"
    found = imports_inside_functions(copy)
    assert put_back in found  # and the copy reads as the package does otherwise:
    assert [line for line in found if line != put_back] == imports_inside_functions(PACKAGE)


@pytest.mark.parametrize("module", sorted(module_files(PACKAGE)))
def test_every_module_parses(module):
    ast.parse(module_files(PACKAGE)[module].read_text(encoding="utf-8"))


def test_every_subpackage_is_installed():
    """pyproject.toml lists the package's folders: a pip install (the Docker image's) leaves out one it misses."""
    import tomllib

    listed = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    folders = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert sorted(listed) == sorted(folders)


def test_modules_named_in_strings_exist():
    """Code run in another process names modules in strings (``python -m streamlab.grading.workers.worker``,
    ``"from streamlab.stack import broker; ..."``, a job ``"streamlab.lessons.m04_recovery:count_requests"``):
    each must be a module of the package, or the other process fails where no import test looks."""
    import re

    modules = module_files(PACKAGE)
    known = set(modules)

    def defines(module: str, name: str) -> bool:  # a module, or a name the module binds at its top level
        if f"{module}.{name}" in known:
            return True
        tree = ast.parse(modules[module].read_text(encoding="utf-8")) if module in modules else ast.Module(body=[])
        bound = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
                 for alias in node.names}
        bound |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        bound |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                  if isinstance(t, ast.Name)}
        return name in bound

    named = re.compile(r"from (streamlab(?:\.\w+)*) import (\w+)|-m[\"', ]+(streamlab(?:\.\w+)+)|"
                       r"\b(streamlab(?:\.\w+)+):\w+")
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for match in named.finditer(node.value):
                    base, name, dash_m, job = match.groups()
                    if base and not defines(base, name):
                        wrong.append(f"{path.name}: from {base} import {name}")
                    for module in (dash_m, job):
                        if module and module not in known:
                            wrong.append(f"{path.name}: {module}")
    assert not wrong, wrong
