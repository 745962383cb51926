"""The grader's own nbgrader and nbconvert steps are plain classes: one to a file in ``streamlab/grading/steps/``,
importable and greppable, as nbgrader's preprocessors are (no class built inside a function, none reached through a
module ``__getattr__``)."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from traitlets.utils.importstring import import_item

import streamlab.grading
from streamlab.grading.sandbox.box import SANDBOX_KERNEL_MANAGER
from streamlab.grading.steps.sandbox_kernel_manager import SandboxKernelManager

GRADING = Path(streamlab.grading.__file__).parent
STEPS = GRADING / "steps"


def _camel(stem: str) -> str:
    return "".join(part.capitalize() for part in stem.split("_"))


def test_each_step_is_one_class_in_a_file_named_after_it():
    files = sorted(path for path in STEPS.glob("*.py") if path.name != "__init__.py")
    assert len(files) == 8
    listed = (STEPS / "__init__.py").read_text()
    for path in files:
        classes = [node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)]
        assert classes == [_camel(path.stem)], path.name
        module = importlib.import_module(f"streamlab.grading.steps.{path.stem}")
        assert getattr(module, classes[0]).__module__ == module.__name__
        assert re.search(rf"^\s+{path.stem}\s+{classes[0]}:", listed, re.M), f"steps/__init__ does not list {path.stem}"


def test_no_class_in_the_grader_is_built_inside_a_function():
    found = []
    for path in sorted(GRADING.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            found += [f"{path.relative_to(GRADING)}: {function.name} builds {node.name}"
                      for node in ast.walk(function) if isinstance(node, ast.ClassDef)]
        found += [f"{path.relative_to(GRADING)}: a module __getattr__" for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
    assert found == []


def test_the_sandbox_names_its_kernel_manager_by_a_path_that_imports():
    # the sandbox's config names it as a string (nbclient imports it), so that importing the grader stays light
    assert import_item(SANDBOX_KERNEL_MANAGER) is SandboxKernelManager


def test_the_sandbox_kernel_manager_is_configured_as_any_traitlets_class(tmp_path):
    from traitlets.config import Config

    config = Config()
    config.SandboxKernelManager.folder = str(tmp_path)
    config.SandboxKernelManager.env = {"STREAMLAB_X": "1"}
    config.BoundedKernelManager.output = str(tmp_path / "out.log")   # a parent's section applies too
    manager = SandboxKernelManager(config=config)
    assert (manager.folder, manager.env, manager.output, manager.uid) == (
        str(tmp_path), {"STREAMLAB_X": "1"}, str(tmp_path / "out.log"), None)
