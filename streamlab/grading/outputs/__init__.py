"""The outputs: what grading leaves for students and instructors. Read in this order:

    results   Status, Outcome, CheckResult, the worker's report (WorkerReport), a student's Result, grades.csv
    withhold  hidden tests taken out before the notebook runs: nothing of the answer key in the kernel
    feedback  what feedback may show (quotes of hidden tests withheld, outputs inert), the page for no feedback
    verdicts  the hidden checks' verdicts as people read them: grades.csv's detail, the feedback's checks and traces
    languages the grader's fixed words a learner reads, in the notebook's language (English, Simplified Chinese)
    summary   OUT/summary.html: the class's scores, statuses and pass rate per test cell
    roster    the class roster (file,id,name,email,section) against the submissions
    exports   ``streamlab grade export``: Canvas's, Moodle's and a plain CSV
"""
