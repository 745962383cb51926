"""``DropUngradedMetadata``: in autograde's sanitize steps, in the place of nbgrader's ``DeduplicateIds``: the nbgrader
metadata that grades nothing is taken off the grader's copy of the notebook, so nbgrader grades the rest.

Two kinds, both common in a learner's notebook and both graded nowhere:
- a copied cell's: JupyterLab's copy and paste keeps a cell's metadata, so an answer cell pasted as a backup
  carries the answer's grade id twice. nbgrader means to keep the last copy (its issue 108) but empties the
  others' metadata to ``{}``, which its own check then reads as schema version 0: autograde fails with "use
  an old version of the nbgrader metadata format" (its issue 1083, open). Here the others lose the key.
- a cell's that claims no flag (no ``grade``, ``solution``, ``locked`` or ``task``): nbgrader grades and puts
  back nothing by it, but refuses it when it lacks the schema version.

The grader's check before the run (``run/submissions.py``, ``check_grade_cells``) refuses copies of test and locked
cells, and any flag that is not the lab's, so what is taken off here is only what no score depends on."""
from __future__ import annotations

from nbconvert.preprocessors import Preprocessor

from ..labs import FLAGS


class DropUngradedMetadata(Preprocessor):
    """Of each grade id, the last cell keeps its nbgrader metadata; earlier copies, and cells that claim no flag,
    lose it."""

    enabled = True  # nbconvert registers a step disabled unless it says so

    def preprocess(self, nb, resources):
        seen = set()
        for cell in reversed(nb.cells):
            meta = cell.get("metadata", {}).get("nbgrader")
            if not isinstance(meta, dict):   # none, or not an object (the check before the run refuses that)
                continue
            grade_id = meta.get("grade_id")
            if not any(meta.get(flag) for flag in FLAGS) or (isinstance(grade_id, str) and grade_id in seen):
                del cell.metadata["nbgrader"]
            elif isinstance(grade_id, str):
                seen.add(grade_id)
        return nb, resources
