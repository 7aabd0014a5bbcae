"""Row helper processes: a second core for the rows of whole chunks.

This package is the parent's side: ``pool`` (the helpers it starts, the jobs it gives them
and follows), with ``launch`` (starting and ending a helper process) and ``inboxes`` (what a
helper reported of each job, and its pace); ``messages`` is what the two say to each
other. The helper itself is ``engine.helper_child`` (``python -m
bulkops.engine.helper_child``), apart so that the parent's side does not import the row
loops it runs: it runs the same row and batch loops as the parent (``engine.loops``); only
where their outcomes go differs: its ``RowSink`` turns them into progress reports, which
the parent hands to its own sink.
"""
