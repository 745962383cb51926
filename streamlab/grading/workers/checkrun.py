"""The child process of ``streamlab check`` (see ``selfcheck``): it runs the copy of a lab.

    python -m streamlab.grading.workers.checkrun NOTEBOOK --out EXECUTED --cell-timeout S

It runs NOTEBOOK with nbgrader's own ``Execute`` preprocessor and the course's nbgrader_config.py
(so the same kernel arguments, per-cell limit and interrupt as ``streamlab grade``), with
``NBGRADER_EXECUTION=autograde`` as nbgrader's autograde sets it. The notebook is saved to EXECUTED
after every cell, so a run stopped at the whole-notebook limit still shows how far it got; the
notebook's metadata ``streamlab_selfcheck`` says whether it ran to the end, or what stopped it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..labs import nbgrader_config


def execute(source: Path, out: Path, cell_timeout_s: float) -> None:
    """In the child: run ``source`` with nbgrader's own Execute preprocessor and the course's config,
    saving the notebook to ``out`` after every cell, so a run stopped at the limit still shows how far it got."""
    import nbformat
    from nbgrader.preprocessors import Execute

    class SavingExecute(Execute):
        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            self._save()

        def _save(self):
            nbformat.write(self.nb, out.with_suffix(".tmp"))
            out.with_suffix(".tmp").replace(out)

    config = nbgrader_config(source.parent, cell_timeout=cell_timeout_s)
    nb = nbformat.read(source, as_version=4)
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # as nbgrader's autograde sets it
    runner = SavingExecute(config=config)
    try:
        nb, _ = runner.preprocess(nb, {"metadata": {"path": str(source.parent)}})
        nb.metadata["streamlab_selfcheck"] = {"complete": True}
    except Exception as err:  # the kernel died, or a cell could not be interrupted
        # the cells that finished, as last saved: the first one missing is the one that was running
        nb = nbformat.read(out, as_version=4) if out.exists() else nb
        nb.metadata["streamlab_selfcheck"] = {"error": f"{type(err).__name__}: {str(err).strip()[:300]}"}
    nbformat.write(nb, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamlab.grading.workers.checkrun",
                                     description="Run a lab copy for `streamlab check` (started by it).")
    parser.add_argument("source")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cell-timeout", type=float, required=True)
    args = parser.parse_args(argv)
    execute(Path(args.source), Path(args.out), args.cell_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
