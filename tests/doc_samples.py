"""The code samples of README.md and every page under docs/, read as the tests run them.

Every fenced block of a page is one of:

- an include (``--8<-- "path"``): the sample is a file of the repository, which a test runs
  (``docs_src/`` holds the samples no other test needs, FastAPI's convention);
- a ``python`` or shell (``sh``, ``bash``, ``console``) block: run, in page order, by
  ``tests/e2e/test_doc_samples.py`` against a service of its own;
- a block marked, on the line right above its fence, with an HTML comment (invisible on
  the site and on GitHub) saying how it is run or why it is not code:

  ``<!-- sample: output -->``          what a command prints, a file's content, a
                                        configuration fragment of another program: not run
  ``<!-- sample: background -->``      a shell block starting a long-running process (a
                                        service): started in the background, waited for,
                                        stopped after the page
  ``<!-- sample: file PATH -->``       a file the following blocks use: written to PATH
  ``<!-- sample: pytest -->``          Python test functions: run with pytest, after the
                                        page's earlier Python blocks
  ``<!-- sample: elsewhere FILE -->``  run by that test file, or that Makefile (a recipe
                                        needing a set-up of its own)

A page whose samples talk to a running service says how the reader starts it, anywhere on
the page: ``<!-- samples need: make run -->``. The runner starts that command in the
background before the page's first block (as the reader did in another terminal). A page
without that line and without a ``background`` block whose shell samples call ``bulkops``
or ``curl`` gets ``bulkops serve`` (the built-in examples).

A new page is picked up by the glob: its samples run without anyone listing them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = frozenset({"sh", "bash", "shell", "console"})
KINDS = frozenset({"output", "background", "file", "pytest", "elsewhere"})
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_MARKER = re.compile(r"^\s*<!--\s*sample:\s*(?P<kind>[\w-]+)\s*(?P<arg>.*?)\s*-->\s*$")
_SERVICE = re.compile(r"^<!-- samples need: (?P<command>.+?) -->$", re.MULTILINE)
_INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    lang: str
    text: str  # without the page's indentation
    kind: str | None  # the marker's kind, if any
    arg: str  # the marker's argument

    @property
    def include(self) -> str | None:
        """The path an include block shows (``file.py:section`` gives ``file.py``)."""
        found = _INCLUDE.match(self.text.strip()) if self.text.strip() else None
        return None if found is None else found["path"].split(":")[0]

    @property
    def runs(self) -> bool:
        """Whether the page runner runs it."""
        if self.include is not None or self.kind in ("output", "elsewhere"):
            return False
        return self.kind is not None or self.lang == "python" or self.lang in SHELL

    def where(self) -> str:
        """``page:line``, for messages."""
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of the documentation."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, in order."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = "\n".join(line[indent:] for line in lines[index + 1 : end])
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        found.append(
            Block(
                page=str(page.relative_to(ROOT)),
                line=index + 1,
                lang=opening["lang"].lower(),
                text=body + "\n",
                kind=None if marker is None else marker["kind"],
                arg="" if marker is None else marker["arg"],
            )
        )
        index = end + 1
    return found


def every_block() -> list[Block]:
    """Every fenced block of every page."""
    return [block for page in pages() for block in blocks(page)]


def service(page: Path) -> str | None:
    """The command that starts the service a page's samples use, if they use one."""
    found = _SERVICE.search(page.read_text())
    return None if found is None else found["command"]
