"""``streamlab classroom ...`` (the instructor's) and ``streamlab submit LAB`` (a student's, in the classroom)."""
from __future__ import annotations

import sys
from pathlib import Path

from . import hub, student


def _run(action) -> int:
    try:
        result = action()
    except (hub.ClassroomError, FileNotFoundError) as err:
        print(f"streamlab: {err}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


def add_classroom_commands(sub) -> None:
    classroom = sub.add_parser("classroom", help="a class on one server: JupyterHub, a container per student, one "
                                                 "Kafka with a principal per student")
    classroom.add_argument("--dir", type=Path, default=None, help="its state (default .streamlab/classroom)")
    actions = classroom.add_subparsers(dest="action", required=True)
    up = actions.add_parser("up", help="start the hub and the class's Kafka (or say where they run)")
    up.add_argument("--roster", type=Path, required=True, help="a file of student names, one per line")
    up.add_argument("--teacher", default="teacher", help="the hub's admin user (default: teacher)")
    up.add_argument("--ip", default="0.0.0.0", help="where students connect (default: every interface)")
    up.add_argument("--port", type=int, default=8000, help="the students' port; the hub uses PORT+1 and PORT+2 too")
    up.add_argument("--memory", default=hub.STUDENT_MEMORY, help=f"per student (default {hub.STUDENT_MEMORY})")
    up.add_argument("--cpus", type=float, default=hub.STUDENT_CPUS, help=f"per student (default {hub.STUDENT_CPUS:g})")
    up.add_argument("--language", choices=("en", "zh"), default="en",
                    help="the class's language: en, or zh (Simplified Chinese lessons and labs, graded the same)")
    up.set_defaults(func=lambda a: _run(lambda: hub.up(a.roster, teacher=a.teacher, ip=a.ip, port=a.port,
                                                       memory=a.memory, cpus=a.cpus, directory=a.dir,
                                                       language=a.language) and 0))
    actions.add_parser("down", help="stop it all; the students' files and topics are kept").set_defaults(
        func=lambda a: _run(lambda: hub.down(directory=a.dir)))
    actions.add_parser("status", help="where it runs, whose servers run").set_defaults(
        func=lambda a: _run(lambda: hub.status(directory=a.dir)))
    hand_out = actions.add_parser("hand-out", help="the released lab into every running student's labs/LAB/")
    hand_out.add_argument("lab")
    hand_out.set_defaults(func=lambda a: _run(lambda: hub.hand_out(a.lab, directory=a.dir) and 0))
    collect = actions.add_parser("collect", help="every student's submitted/LAB into OUT/submitted/ (for `streamlab "
                                                 "grade LAB OUT/submitted`)")
    collect.add_argument("lab")
    collect.add_argument("out", type=Path)
    collect.set_defaults(func=lambda a: _run(lambda: hub.collect(a.lab, a.out, directory=a.dir) and 0))
    back = actions.add_parser("return", help="each student's feedback page (GRADES/feedback/) into their feedback/")
    back.add_argument("lab")
    back.add_argument("grades", type=Path)
    back.set_defaults(func=lambda a: _run(lambda: hub.return_feedback(a.lab, a.grades, directory=a.dir) and 0))
    actions.add_parser("door", help="(in a student's container) the Kafka door as the student").set_defaults(
        func=lambda a: student.door_main())

    submit = sub.add_parser("submit", help="(in the classroom) hand in labs/LAB/LAB.ipynb for the teacher to collect")
    submit.add_argument("lab")
    submit.set_defaults(func=lambda a: _run(lambda: print(f"Submitted {student.submit(a.lab)}. Submitting again "
                                                          f"replaces it.") or 0))
