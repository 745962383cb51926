"""The workers: the child processes that grade one submission at a time. Read in this order:

    context        SubmissionContext: one submission as the grader hands it to a worker (JSON on the channel)
    warm           WarmWorker: the grader's end of a worker (started once per slot, a channel to it)
    worker         the worker's loop: nbgrader's autograde in the sandbox, the checks, the feedback, a report
    hidden         the hidden checks' process per submission (ChecksProcess), and their points in the gradebook
    checks_runner  that process (python -m streamlab.grading.workers.checks_runner), in a sandbox of its own
"""
