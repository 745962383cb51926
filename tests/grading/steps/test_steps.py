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
    assert len(files) == 9
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


def test_feedback_pages_are_the_same_with_their_templates_compiled_once(tmp_path, monkeypatch):
    """GenerateFeedback's exporter (nbgrader_config.py) is FeedbackExporter: its second page compiles no template
    (the first compiled nbgrader's and nbconvert's), and each page is the one nbconvert's own HTMLExporter makes."""
    import jinja2
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    from streamlab import grading
    from streamlab.grading.labs import nbgrader_config
    from streamlab.grading.steps import feedback_exporter
    from streamlab.grading.steps.feedback_exporter import FeedbackExporter

    config = nbgrader_config(tmp_path)
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    assert converter.exporter_class is FeedbackExporter
    compiled = []
    compile_template = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile",
                        lambda self, *args, **kwargs: compiled.append(args[1:2]) or compile_template(self, *args,
                                                                                                     **kwargs))
    nb = grading.reference_notebook(grading.find_labs()[0])
    for cell in nb.cells:       # what GetGrades sets from the gradebook
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader.setdefault("score", 0.0)
    resources = {"nbgrader": {"notebook": "lab", "score": 1.0, "max_score": 2.0, "late_penalty": 0}}

    def page(exporter_class) -> str:
        exporter = exporter_class(parent=converter, config=converter.config)   # as GenerateFeedback.start() does
        return exporter.from_notebook_node(nb, resources=dict(resources))[0]

    nbconverts = page(HTMLExporter)
    assert len(compiled) >= 5 and "Score: 1.0 / 2.0" in nbconverts  # nbgrader's feedback page, and its templates
    feedback_exporter.COMPILED.clear()
    compiled.clear()
    first = page(FeedbackExporter)
    assert len(compiled) >= 5 and len(feedback_exporter.COMPILED) == len(compiled)
    compiled.clear()
    second = page(FeedbackExporter)
    assert compiled == []
    assert first == second == nbconverts


def test_a_template_changed_on_disk_is_compiled_again(tmp_path):
    """The compiled templates are Jinja's bytecode, checked against the template's source each time it is loaded."""
    import jinja2

    from streamlab.grading.steps.feedback_exporter import TEMPLATES

    template = tmp_path / "page.j2"

    def render() -> str:   # a new environment each time, as each exporter makes one
        environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)), bytecode_cache=TEMPLATES)
        return environment.get_template("page.j2").render(x=1)

    template.write_text("one {{ x }}")
    assert render() == render() == "one 1"
    template.write_text("two {{ x }}")
    assert render() == "two 1"
