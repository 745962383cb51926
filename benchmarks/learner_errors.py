"""What a learner reads when a cell fails with a catalogued mistake: for each mistake the tests make
(tests/lessons/test_mistakes.py, the same cells in one kernel), how many lines of output come before the line
that says the cause, in Spark's error alone ("before") and with the course's paragraph first ("after": the
paragraph's first line is the course's header, its second names the learner's code and the cause), and the
paragraph itself. Reports numbers; asserts nothing.

    .venv/bin/python benchmarks/learner_errors.py            # needs the course's broker (started if not running)

"before" is counted in Spark's error as the kernel shows it (the error output after the course's paragraph,
which is that error unchanged); "absent" means Spark's error never says the cause (it is in Spark's log only).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from streamlab import bootstrap_servers
from streamlab.lessons import mistakes

ROOT = Path(__file__).resolve().parents[1]


def _catalogue_tests():
    spec = importlib.util.spec_from_file_location("test_mistakes", ROOT / "tests" / "lessons" / "test_mistakes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    tests = _catalogue_tests()
    cells = tests.run_catalogue(bootstrap_servers())
    print(f"{'mistake':38} {'before':>7} {'after':>6}  lines of the error output")
    for case, cell in zip(tests.CASES, cells[1:]):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if not errors:
            print(f"{case.mistake:38} (no error)")
            continue
        traceback = errors[0].traceback
        before = tests.lines_above(traceback[1:], case.cause) if case.cause else None
        total = len(tests._lines(traceback))
        said = mistakes.learner_message(traceback)
        print(f"{case.mistake:38} {'absent' if before is None else before:>7} {1 if said else '-':>6}  {total}")
    print()
    for case, cell in zip(tests.CASES, cells[1:]):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        print(f"- {case.mistake}: {mistakes.learner_message(errors[0].traceback) if errors else '(no error)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
