"""docs/ reads as a map: docs/README.md links every page; the measurements' files are in
docs/results/, none beside the pages, and each is cited from a page."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_page_is_on_the_map():
    index = (DOCS / "README.md").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    assert pages and [page for page in pages if f"]({page})" not in index] == []


def test_results_are_in_their_folder_and_each_is_cited():
    beside_the_pages = [p.name for p in DOCS.iterdir() if p.is_file() and p.suffix != ".md"]
    assert beside_the_pages == []
    text = "\n".join(p.read_text() for p in [*DOCS.glob("*.md"), DOCS.parent / "README.md"])
    results = sorted(p.name for p in (DOCS / "results").iterdir())
    assert results and [name for name in results if f"results/{name}" not in text] == []
