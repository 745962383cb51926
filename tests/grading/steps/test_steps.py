"""The grader's own nbgrader and nbconvert steps are plain classes: one to a file in ``streamlab/grading/steps/``,
importable and greppable, as nbgrader's preprocessors are (no class built inside a function, none reached through a
module ``__getattr__``)."""
from __future__ import annotations

import ast
import copy
import importlib
import re
from pathlib import Path

import pytest
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
    assert len(files) == 10
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


def test_every_step_the_grader_gives_nbgrader_runs(tmp_path):
    """nbconvert registers a step disabled unless the step says otherwise; nbgrader's own say so. The grader's
    ``WithholdHiddenTests`` did not, so it sat in the sanitize steps and never ran (no lab has hidden tests now:
    no grade changed)."""
    from nbconvert.exporters import NotebookExporter

    from streamlab.grading.workers.worker import grading_config

    config = grading_config(tmp_path, 60)
    lists = (config.Autograde.sanitize_preprocessors, config.Autograde.autograde_preprocessors,
             config.GenerateFeedback.preprocessors)
    ours = [step for steps in lists for step in steps if step.__module__.startswith("streamlab.")]
    assert {step.__name__ for step in ours} >= {"DropUngradedMetadata", "WithholdHiddenTests", "BoundedExecute",
                                                 "HideHiddenTests", "InertFeedback"}
    exporter = NotebookExporter(config=config)
    for step in ours:
        exporter.register_preprocessor(step)   # as nbgrader's Autograde does
    assert [(type(p).__name__, p.enabled) for p in exporter._preprocessors[-len(ours):]] == \
        [(step.__name__, True) for step in ours]


def _pasted(cell, source: str, cell_id: str):
    """``cell`` as JupyterLab pastes it, then edited to ``source``: its metadata (and so its grade id) copied, a cell
    id of its own."""
    pasted = copy.deepcopy(cell)
    pasted["id"], pasted.source = cell_id, source
    return pasted


def test_a_pasted_answer_cell_is_graded_by_its_last_copy():
    """In the place of nbgrader's ``DeduplicateIds``, which means to keep the last copy of a grade id (nbgrader issue
    108) but leaves ``{}`` on the others, which nbgrader's own check then refuses as schema version 0 (nbgrader issue
    1083): a learner who pasted an answer cell got "invalid notebook". Cells claiming no flag lose their metadata
    too (nbgrader grades nothing by them, but refuses one without a schema version)."""
    import nbformat
    from nbgrader.nbgraderformat import MetadataValidator, SchemaTooOldError
    from nbgrader.preprocessors import DeduplicateIds

    from streamlab.grading.labs import answer_cells, find_labs, released_notebook
    from streamlab.grading.steps.drop_ungraded_metadata import DropUngradedMetadata

    lab = find_labs()[0]
    ids = [c.metadata.nbgrader["grade_id"] for c in released_notebook(lab).cells if "nbgrader" in c.metadata]

    def pasted_twice():
        nb = released_notebook(lab)
        answer = answer_cells(nb)[0]
        at = nb.cells.index(answer)
        nb.cells[at + 1:at + 1] = [_pasted(answer, "# my first try", "pasted-1"),
                                   _pasted(answer, "# my answer", "pasted-2")]
        nb.cells.append(nbformat.v4.new_markdown_cell("notes", metadata={"nbgrader": {"grade_id": "notes"}}))
        return nb, answer.metadata.nbgrader["grade_id"]

    nb, _ = pasted_twice()
    DeduplicateIds().preprocess(nb, {})
    with pytest.raises(SchemaTooOldError):   # nbgrader's own step (when this fails, nbgrader's is fixed)
        MetadataValidator().validate_nb(nb)
    nb, grade_id = pasted_twice()
    nb, _ = DropUngradedMetadata().preprocess(nb, {})
    MetadataValidator().validate_nb(nb)
    assert [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id] == ["# my answer"]
    assert [c.metadata.nbgrader["grade_id"] for c in nb.cells if "nbgrader" in c.metadata] == ids
