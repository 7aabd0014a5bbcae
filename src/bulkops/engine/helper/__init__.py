"""Row helper processes: a second core for the rows of whole chunks.

``pool`` is the parent's side (the helpers it starts, the jobs it gives them and follows),
with ``launch`` (starting and ending a helper process) and ``inboxes`` (what a helper
reported of each job, and its pace); ``process`` is the helper itself (``python -m
bulkops.engine.helper.process``), ``messages`` what the two say to each other. The helper
runs the same row and batch loops as the parent (``engine.loops``); only where their
outcomes go differs: its ``RowSink`` turns them into progress reports, which the parent
hands to its own sink.
"""
