"""``python -m bulkops`` runs the command-line program."""

from __future__ import annotations

from bulkops.cli.main import main

main()
