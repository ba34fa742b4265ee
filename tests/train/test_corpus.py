"""Corpus building on tiny source trees: near-duplicates, held-out priority, sources and licenses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infill.train import corpus
from infill.train.corpus import build_corpus, load_corpus, minhash

pytestmark = pytest.mark.training  # infill.train

ORIGINAL = '''"""Inventory bookkeeping for a small shop."""

import json


def load_stock(path):
    """Read the stock file: one JSON object per line."""
    stock = {}
    with open(path) as handle:
        for line in handle:
            item = json.loads(line)
            stock[item["sku"]] = item
    return stock


def restock(stock, sku, amount):
    """Add `amount` units of `sku`, creating the entry if needed."""
    entry = stock.setdefault(sku, {"sku": sku, "count": 0})
    entry["count"] += amount
    return entry["count"]


def low_items(stock, threshold=5):
    """SKUs whose count is below the threshold, sorted."""
    return sorted(sku for sku, entry in stock.items() if entry["count"] < threshold)


def total_value(stock, prices):
    """Value of everything on the shelves."""
    value = 0.0
    for sku, entry in stock.items():
        value += prices.get(sku, 0.0) * entry["count"]
    return round(value, 2)
'''

RENAMED = ORIGINAL.replace("value", "worth")  # a renamed variable (in one function)
ONE_LINE_CHANGED = ORIGINAL.replace("return round(value, 2)", "return int(value)")

DISTINCT = '''"""Parse and pretty-print durations such as 1h30m."""

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse(text):
    total = 0
    for amount, unit in re.findall(r"(\\d+)([dhms])", text):
        total += int(amount) * UNITS[unit]
    return total


class Duration:
    def __init__(self, seconds):
        self.seconds = seconds

    def __str__(self):
        parts, rest = [], self.seconds
        for unit, size in UNITS.items():
            if rest >= size:
                parts.append(f"{rest // size}{unit}")
                rest %= size
        return "".join(parts) or "0s"
'''


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def packages(run: Path, split: str | None = None) -> list[str]:
    return sorted(r.package for r in load_corpus(run / "corpus.jsonl.gz", split=split))


def test_minhash_is_deterministic_and_tracks_similarity():
    assert np.array_equal(minhash(ORIGINAL), minhash(ORIGINAL))
    assert np.mean(minhash(ORIGINAL) == minhash(ONE_LINE_CHANGED)) > 0.8
    assert np.mean(minhash(ORIGINAL) == minhash(RENAMED)) > 0.7
    assert np.mean(minhash(ORIGINAL) == minhash(DISTINCT)) < 0.2


def test_near_duplicates_are_dropped_and_distinct_files_kept(tmp_path):
    root = tmp_path / "src"
    write(root, "shop/stock.py", ORIGINAL)
    write(root, "shop2/stock.py", RENAMED)
    write(root, "shop3/stock.py", ONE_LINE_CHANGED)
    write(root, "timing/durations.py", DISTINCT)
    manifest = build_corpus(tmp_path / "run", roots=[root])
    assert packages(tmp_path / "run") == ["shop", "timing"]  # the first of the group is kept
    assert manifest["counts"]["near_duplicate"] == 2
    assert manifest["counts"]["kept"] == 2
    assert manifest["near_duplicate_threshold"] == corpus.NEAR_DUPLICATE_THRESHOLD


def test_near_duplicate_removal_can_be_switched_off(tmp_path):
    root = tmp_path / "src"
    write(root, "shop/stock.py", ORIGINAL)
    write(root, "shop2/stock.py", RENAMED)
    trailing = ORIGINAL.replace("json\n", "json   \n")  # an exact duplicate up to trailing whitespace
    write(root, "shop3/stock.py", trailing)
    manifest = build_corpus(tmp_path / "run", roots=[root], near_duplicate_threshold=None)
    assert packages(tmp_path / "run") == ["shop", "shop2"]
    assert manifest["counts"]["duplicate"] == 1
    assert "near_duplicate" not in manifest["counts"]


def test_heldout_split_by_package_wins_over_a_training_copy(tmp_path):
    root = tmp_path / "src"
    write(root, "aaa/stock.py", ORIGINAL)  # scanned first, but a near copy of held-out code
    write(root, "json/stock.py", ONE_LINE_CHANGED)  # json is a held-out package
    write(root, "test/test_json/test_stock.py", DISTINCT)  # the stdlib tests of json: held out too
    manifest = build_corpus(tmp_path / "run", roots=[root], near_duplicate_threshold=0.7)
    run = tmp_path / "run"
    assert packages(run, "heldout") == ["json", "json"]
    assert packages(run, "train") == []  # aaa's copy was the one dropped
    assert manifest["packages"]["heldout"] == {"json": 2}
    assert manifest["sources"]["json"]["split"] == "heldout"


def test_the_projects_own_code_is_excluded(tmp_path):
    root = tmp_path / "src"
    write(root, "infill/bench/evalset/strings.py", ORIGINAL)
    write(root, "__editable___infill_0_1_0_finder.py", DISTINCT.replace("Duration", "Finder"))
    write(root, "timing/durations.py", DISTINCT)
    manifest = build_corpus(tmp_path / "run", roots=[root])
    assert packages(tmp_path / "run") == ["timing"]
    assert manifest["counts"]["excluded"] == 2


def test_packages_of_reserved_benchmarks_are_excluded(tmp_path):
    """HumanEval, MBPP and sets built from them stay out of training wherever the corpus is built."""
    root = tmp_path / "src"
    write(root, "human_eval/data.py", ORIGINAL)
    write(root, "evalplus/data/mbpp.py", DISTINCT.replace("Duration", "Problem"))
    write(root, "timing/durations.py", DISTINCT)
    manifest = build_corpus(tmp_path / "run", roots=[root])
    assert packages(tmp_path / "run") == ["timing"]
    assert manifest["counts"]["excluded"] == 2


def test_manifest_lists_sources_and_licenses(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write(site, "shop/stock.py", ORIGINAL)
    write(site, "timing/durations.py", DISTINCT)
    write(site, "loose.py", DISTINCT.replace("Duration", "Interval") + "\nLOOSE = True\n" * 40)
    write(site, "shop-1.2.dist-info/METADATA", "Metadata-Version: 2.4\nName: shop\nVersion: 1.2\n"
          "License-Expression: MIT\nClassifier: License :: OSI Approved :: BSD License\n")  # fmt: skip
    write(site, "shop-1.2.dist-info/top_level.txt", "shop\n")
    write(site, "timing-0.3.dist-info/METADATA", "Metadata-Version: 2.1\nName: timing\nVersion: 0.3\n"
          "License: UNKNOWN\nClassifier: License :: OSI Approved :: Apache Software License\n")  # fmt: skip
    write(site, "timing-0.3.dist-info/RECORD", "timing/__init__.py,,\ntiming/durations.py,,\n")
    stdlib = tmp_path / "lib"
    write(stdlib, "colorful.py", DISTINCT.replace("Duration", "Colour") + "\nCOLOUR = 1\n" * 40)
    write(stdlib, "site-packages/vendored/mod.py", ORIGINAL.replace("stock", "shelf") + "\nX = 1\n" * 40)
    monkeypatch.setattr(corpus, "stdlib_root", lambda: stdlib.resolve())

    manifest = build_corpus(tmp_path / "run", roots=[stdlib, site], near_duplicate_threshold=None)
    sources = manifest["sources"]
    assert sources["shop"]["license"] == "MIT"  # License-Expression first
    assert (sources["shop"]["distribution"], sources["shop"]["version"]) == ("shop", "1.2")
    assert sources["timing"]["license"] == "Apache Software License"  # from the classifier
    assert sources["loose"]["license"] == "unknown"
    assert sources["colorful"]["license"] == "PSF"
    assert sources["colorful"]["origin"] == "stdlib"
    assert sources["vendored"]["license"] == "unknown"  # under the stdlib root, but not the stdlib
    assert manifest["licenses"]["MIT"] == 1
    assert sum(manifest["licenses"].values()) == manifest["counts"]["kept"] == 5
    on_disk = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert on_disk["sources"] == sources
    for key in ("roots", "counts", "heldout_packages", "packages"):  # the fields it always had
        assert key in on_disk


def test_load_corpus_reads_records_with_the_fields_it_always_had(tmp_path):
    root = tmp_path / "src"
    write(root, "timing/durations.py", DISTINCT)
    build_corpus(tmp_path / "run", roots=[root])
    (record,) = load_corpus(tmp_path / "run" / "corpus.jsonl.gz")
    assert (record.path, record.root, record.package, record.split) == (
        str(Path("timing/durations.py")),
        str(root),
        "timing",
        "train",
    )
    assert record.text == DISTINCT
    assert (
        "body",
        record.text.index("total = 0") - 4,
        record.text.index("    return total") + 16,
    ) in record.spans


def test_ast_spans_count_lines_as_ast_does_across_form_feeds():
    text = 'x = 1\n\x0c\ndef f():\n    """Doc \u00e9."""\n    return "\u00e9" + "b"\n'
    spans = {kind: text[a:b] for kind, a, b in corpus.ast_spans(text) if kind in ("docstring", "body")}
    assert spans == {"docstring": '"""Doc \u00e9."""', "body": '    return "\u00e9" + "b"'}


def test_a_cut_parallel_map_keeps_the_first_results_in_order_and_stops_its_pool():
    items = [f"x{i}" * (i + 1) for i in range(200)]
    whole = corpus.parallel_map(len, items, workers=2, desc="test")
    assert whole == [len(item) for item in items]
    cut = corpus.parallel_map(len, items, workers=2, desc="test", cut=lambda done: done >= 37)
    assert cut == whole[:37]


def test_a_walk_asked_for_some_packages_finds_what_filtering_the_whole_walk_finds(tmp_path):
    """`iter_python_files(roots, wanted)` asks `wanted` before it resolves a path; what it yields
    is the whole walk's files that `wanted` accepts, in the same order (a file reached twice, by a
    link, once)."""
    stdlib, site = tmp_path / "lib", tmp_path / "site"
    files = ["json/__init__.py", "json/decoder.py", "email/parser.py", "csv.py",
             "test/test_json/test_dump.py", "test/test_email.py", "site-packages/tqdm/std.py"]  # fmt: skip
    for path in files:
        (stdlib / path).parent.mkdir(parents=True, exist_ok=True)
        (stdlib / path).write_text("x = 1\n")
    (site / "tqdm").mkdir(parents=True)
    (site / "tqdm" / "auto.py").write_text("x = 2\n")
    (site / "csv.py").symlink_to(stdlib / "csv.py")  # the same file again, under the second root

    def wanted(relative: Path) -> bool:
        return corpus.package_of(relative) in {"json", "csv", "tqdm"}

    roots = [stdlib, site]
    whole = [(root, path) for root, path in corpus.iter_python_files(roots) if wanted(path.relative_to(root))]
    asked = list(corpus.iter_python_files(roots, wanted))
    assert asked == whole
    assert [str(path.relative_to(root)) for root, path in asked] == [
        "csv.py", "json/__init__.py", "json/decoder.py", "site-packages/tqdm/std.py",
        "test/test_json/test_dump.py", "tqdm/auto.py",
    ]  # fmt: skip
