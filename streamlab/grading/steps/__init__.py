"""The grader's own steps in nbgrader's and nbconvert's pipelines: each a class in a file of its own, as nbgrader's
preprocessors are. Importing this package imports none of them (each imports nbconvert or jupyter_client, and
every ``streamlab`` command imports the grader); import the class from its file. In the order a submission meets
them:

    bounded_kernel_client   BoundedKernelClient: the kernel's messages, each and queued, bounded (ZeroMQ options)
    bounded_kernel_manager  BoundedKernelManager: starts a kernel with the submission's environment, output to a file
    sandbox_kernel_manager  SandboxKernelManager: the same, its sockets files in the folder the sandbox shares
    bounded_execute         BoundedExecute: nbgrader's Execute keeping each cell's outputs within bounds, saving
                            progress
    drop_ungraded_metadata  DropUngradedMetadata: for nbgrader's DeduplicateIds: a copied cell's metadata taken off
    withhold_hidden_tests   WithholdHiddenTests: after OverwriteCells, before the kernel: hidden test regions out
    hide_hidden_tests       HideHiddenTests: feedback without hidden tests, tracebacks reduced to their message
    inert_feedback          InertFeedback: feedback where nothing a student made can run or call out
    checks_block            ChecksBlock: the block "Checked by the grader" first in each feedback page
    feedback_exporter       FeedbackExporter: nbconvert's HTML exporter for the pages, its templates compiled once

``nbgrader_config.py`` names HideHiddenTests, InertFeedback and FeedbackExporter; the worker (``workers/worker.py``)
sets the others.
"""
