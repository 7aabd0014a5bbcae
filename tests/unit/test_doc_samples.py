"""Every code sample of README.md and docs/ is code a test runs (see ``tests/doc_samples``):
an include of a file in the repository, a block the page runner runs, or a block marked as
output or as run by a named test. New pages are checked without being listed."""

from __future__ import annotations

import pytest

from tests.doc_samples import KINDS, ROOT, SHELL, Block, every_block, pages

BLOCKS = every_block()


def _id(block: Block) -> str:
    return block.where()


@pytest.mark.parametrize("block", BLOCKS, ids=_id)
def test_every_sample_is_run_or_marked(block: Block) -> None:
    if block.kind is not None:
        assert block.kind in KINDS, f"{block.where()}: unknown sample kind {block.kind!r}"
        if block.kind in ("file", "elsewhere"):
            assert block.arg, f"{block.where()}: `sample: {block.kind}` needs a path"
        if block.kind == "elsewhere":
            assert (ROOT / block.arg).is_file(), f"{block.where()}: no file {block.arg}"
        if block.kind == "background":
            assert block.lang in SHELL, f"{block.where()}: only shell blocks run in background"
        return
    if block.include is not None:
        assert (ROOT / block.include).is_file(), f"{block.where()}: {block.include} is missing"
        return
    assert block.lang == "python" or block.lang in SHELL, (
        f"{block.where()}: a ```{block.lang or '(no language)'} block is neither run nor "
        "marked: mark it <!-- sample: output --> (what a command prints, a file's content) "
        "or make it a python or shell sample"
    )


def test_included_samples_are_files_a_test_runs() -> None:
    """An included Python file is imported or run by some test (named in tests/)."""
    tests = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("*.py"))
    shown = {b.include for b in BLOCKS if b.include is not None and b.include.endswith(".py")}
    unrun = [
        path
        for path in sorted(shown)
        if not path.startswith("docs_src/")  # every docs_src file runs (test_docs_src.py)
        and path not in tests
        and path.removeprefix("src/").removesuffix(".py").replace("/", ".") not in tests
    ]
    assert unrun == []


def test_python_samples_compile() -> None:
    """A quick check before the page runner: every Python sample is valid Python."""
    for block in BLOCKS:
        if block.lang == "python" and block.include is None and block.kind != "output":
            compile(block.text, block.where(), "exec")


def test_every_screenshot_is_shown_and_every_shown_one_exists() -> None:
    """``make screenshots`` retakes the images the pages show; none lies around unused."""
    import re

    text = "\n".join(page.read_text() for page in pages())
    shown = set(re.findall(r"screenshots/([\w-]+\.png)", text))
    stored = {path.name for path in (ROOT / "docs" / "screenshots").glob("*.png")}
    assert stored - shown == set(), "unused screenshots: delete them"
    assert shown - stored == set(), "missing screenshots: run make screenshots"
