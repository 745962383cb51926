"""The package's imports, read from its source (AST), never by importing it: which of streamlab's modules each
module loads. The grader's version hashes what a grade's code imports (``runinfo.grade_deciding_files``), and
tests/test_imports.py keeps the rooms' order and finds circles with the same graph.

Every relative import (``from .x import y``, ``from . import x``) and every absolute import of the package
(``import streamlab.x``, or its ``from`` form) counts, at the top of a module or inside a function, in subpackages too.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path


def module_files(root: Path) -> dict[str, Path]:
    """{dotted module name: file} for every .py file of the package rooted at ``root``."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported(module: str, is_package: bool, node: ast.AST, known: set[str]) -> set[str]:
    """The package modules one import statement of ``module`` loads (``known``: the package's module names)."""
    statement = _statement(node)
    return _resolve(module, is_package, statement, known) if statement else set()


def _statement(node: ast.AST) -> tuple | None:
    """An import statement as (level, module, names, plain): ``import a.b`` is (0, None, ("a.b",), True)."""
    if isinstance(node, ast.Import):
        return 0, None, tuple(alias.name for alias in node.names), True
    if isinstance(node, ast.ImportFrom):
        return node.level, node.module, tuple(alias.name for alias in node.names), False
    return None


def _resolve(module: str, is_package: bool, statement: tuple, known: set[str]) -> set[str]:
    level, source, names, plain = statement
    if plain:
        return {_longest_known(name, known) for name in names} - {None}
    if level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (level - 1)]
        base = ".".join(package + ([source] if source else []))
    else:
        base = source or ""
    found = set()
    for name in names:
        if f"{base}.{name}" in known:  # `from . import kafka`: the submodule itself
            found.add(f"{base}.{name}")
        else:  # `from .kafka import ping`: a name defined in that module
            found.add(_longest_known(base, known))
    return found - {None}


def _longest_known(name: str, known: set[str]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


@lru_cache(maxsize=1024)
def _statements(source: str) -> tuple:
    """Every import statement of ``source``, parsed once per text (the grader's version reads the package often)."""
    return tuple(statement for node in ast.walk(ast.parse(source)) if (statement := _statement(node)))


def imports_in(source: str, module: str, known: set[str], *, is_package: bool = False) -> set[str]:
    """The package modules that ``source`` (the text of ``module``, or of a file outside the package) imports."""
    return {target for statement in _statements(source) for target in _resolve(module, is_package, statement, known)}


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: modules of the same package it imports}, anywhere in its source."""
    files = module_files(root)
    known = set(files)
    return {module: imports_in(path.read_text(encoding="utf-8"), module, known,
                               is_package=path.name == "__init__.py") - {module}  # an __init__ naming itself
            for module, path in files.items()}


def closure(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """``start`` and every module they import, directly or not, with the packages that hold them (importing
    ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first)."""
    seen, todo = set(), [m for m in start if m in graph]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parents = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 1)}
        todo += [m for m in graph[module] | parents if m in graph and m not in seen]
    return seen
