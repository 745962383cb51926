"""The run: one folder of submissions in, grades.csv out. Read in this order:

    submissions  finding submissions in a folder (two layouts, exact names, regular files only), check_notebook
    course       one submission's private nbgrader course: the lab's template plus its bytes (grade and check)
    grader       Grader, built whole: grade() one submission into its Result, run() a folder with a warm worker per slot
    shards       which shard grades which submission (a hash of its name)
    progress     progress lines: done / total, rate, time left, and the final line
    runinfo      OUT/run.json: what a run was (lab, shard, versions, settings, machine); the grader's version
    imports      the package's imports read from its source: what a grade's code imports decides the grader's version
    merge        ``streamlab grade merge``: shards' outputs into one, or a refusal naming why
"""
