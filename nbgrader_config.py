"""nbgrader settings for the course's graded labs.

Read by `streamlab release-labs` and `streamlab grade` (which copy these settings into a private
course folder per student), and by plain `nbgrader ...` commands run from the repository root.

    solutions/<lab>/<lab>.ipynb   the instructor version: solutions, visible and hidden tests
    labs/<lab>/<lab>.ipynb        the student version, generated from it (streamlab release-labs)
"""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "stateful-streaming"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
# A lab's hidden checks (solutions/<lab>/hidden_checks.py) run outside the student's kernel; students never get them.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "hidden_checks.py"]

# What students see in place of the solutions.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Running a lab. The first cell starts Spark (a JVM plus the Kafka connector), which takes 10-30 s
# on a 2-core machine, more when it is busy: nbgrader's default of 30 s per cell is too short.
# A cell still running after this many seconds is interrupted and scores 0; the next cells run.
# (`streamlab grade --cell-timeout` overrides it; `--timeout` bounds a whole submission.)
c.Execute.timeout = 300
c.Execute.interrupt_on_timeout = True
# The JVM writes its log to the kernel's stderr. By default ipykernel forwards that low-level
# output into whichever cell is running, and nbgrader gives a test cell 0 points if it shows any
# stderr. With capture_fd_output off, JVM output goes to the grader's log instead of the cell.
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--IPKernelApp.capture_fd_output=False",
]
# A second line of defence: stderr output that is only Spark/JVM chatter is removed before scoring
# (the course's log4j layout "HH:mm:ss LEVEL logger:", JVM start-up notices, PySpark's JSON log lines).
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = (
    r"(?m)^(\d\d:\d\d:\d\d (ERROR|WARN|INFO) |WARNING: Using incubator modules|"
    r"Setting default log level|To adjust logging level|\{\"ts\": \"\d{4}-)"
)

# Feedback shows students their code, their outputs and their score per test cell, but never
# the code of hidden tests (nor tracebacks, which quote it). The instructor opens it too, so what
# the student made is shown inert: markdown and HTML sanitised, no script, each cell's outputs
# bounded (streamlab/grading/bounds.py). The worker then puts a strict Content-Security-Policy
# first in each page (streamlab.grading.outputs.feedback.make_inert).
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

from streamlab.grading.steps.feedback_exporter import FeedbackExporter  # noqa: E402
from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests  # noqa: E402
from streamlab.grading.steps.inert_feedback import InertFeedback  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, InertFeedback, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = FeedbackExporter  # nbconvert's HTML exporter, its templates compiled once
# InertFeedback's markdown is already sanitised HTML: nbconvert's own sanitize_html would show its tags as text.
c.HTMLExporter.sanitize_html = False
