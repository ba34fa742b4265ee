"""infill.text.parse_cache: a text is parsed once, a changed text incrementally, to the same tree."""

from __future__ import annotations

import threading

import tree_sitter
import tree_sitter_python
from hypothesis import given, settings
from hypothesis import strategies as st

from infill.text.parse_cache import ParseCache, common_prefix, point

LANGUAGE = tree_sitter.Language(tree_sitter_python.language())
SOURCE = (
    'import os\n\n\ndef f(a, b):\n    """Sum."""\n    return a + b  # é 🐍\n'
    "\n\nclass C:\n    x = [1,\n         2]\n"
)


def fresh(text: str) -> str:
    return str(tree_sitter.Parser(LANGUAGE).parse(text.encode("utf-8", "surrogatepass")).root_node)


PIECES = st.sampled_from(
    ["x", " ", "\n", "\r\n", "\t", "(", ")", ":", "é", "🐍", "def g():\n    ", "return 1\n", '"""']
)


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 6), st.lists(PIECES, max_size=4)), max_size=6
    )
)
def test_an_incremental_parse_gives_the_tree_of_a_fresh_parse(edits):
    cache = ParseCache(LANGUAGE)
    text = SOURCE
    cache.parse(text)
    for at, removed, inserted in edits:
        at %= len(text) + 1
        text = text[:at] + "".join(inserted) + text[at + removed :]
        data, root = cache.parse(text)
        assert data == text.encode("utf-8", "surrogatepass")
        assert str(root) == fresh(text)


def test_a_text_seen_before_is_not_parsed_again():
    cache = ParseCache(LANGUAGE, kept=2)
    first = cache.parse(SOURCE)[1]
    assert cache.parse(SOURCE)[1] == first  # the same tree
    cache.parse(SOURCE + "a = 1\n")
    cache.parse(SOURCE + "b = 2\n")  # SOURCE is the oldest of three: dropped
    again = cache.parse(SOURCE)[1]
    assert str(again) == str(first)


def test_a_text_after_a_broken_one_is_parsed_once_afresh(monkeypatch):
    """A broken text is parsed afresh; the text after it (broken too, as a fill's canvases are) is
    parsed afresh at once, not incrementally first; after a sound text, incrementally."""
    broken = SOURCE + "def g(:\n"
    texts = {  # each text, in this order, and whether each of its parses was given the old tree
        broken: [True, False],  # after a sound text: incrementally, then afresh (it is broken)
        broken + "x = (\n": [False],  # after a broken one: afresh at once
        SOURCE + "y = 1\n": [False],
        SOURCE + "y = 2\n": [True],  # after a sound one: incrementally
    }
    trees = {text: fresh(text) for text in texts}
    real = tree_sitter.Parser
    parses: list[bool] = []

    class Counting:
        def __init__(self, language):
            self.parser = real(language)

        def parse(self, data, old_tree=None):
            parses.append(old_tree is not None)
            return self.parser.parse(data) if old_tree is None else self.parser.parse(data, old_tree)

    cache = ParseCache(LANGUAGE)
    cache.parse(SOURCE)
    monkeypatch.setattr(tree_sitter, "Parser", Counting)
    for text, expected in texts.items():
        parses.clear()
        assert str(cache.parse(text)[1]) == trees[text]
        assert parses == expected, text


def test_trees_handed_out_are_never_edited():
    """An incremental parse edits a copy: a tree another thread holds keeps its offsets."""
    cache = ParseCache(LANGUAGE)
    _, held = cache.parse(SOURCE)
    before = [(n.start_byte, n.end_byte) for n in held.children]
    cache.parse("# a new first line\n" + SOURCE)
    assert [(n.start_byte, n.end_byte) for n in held.children] == before


def test_parsing_from_several_threads_gives_each_its_tree():
    cache = ParseCache(LANGUAGE)
    texts = [SOURCE + f"v{i} = {i}\n" * (i + 1) for i in range(8)]
    found: dict[int, str] = {}

    def work(i: int) -> None:
        for _ in range(20):
            found[i] = str(cache.parse(texts[i])[1])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(found[i] == fresh(texts[i]) for i in range(8))


def test_common_prefix_and_points():
    assert common_prefix(b"abcdef", b"abcxyz") == 3
    assert common_prefix(b"", b"abc") == 0 and common_prefix(b"abc", b"abc") == 3
    assert point(b"ab\ncd\nef", 7) == (2, 1) and point(b"abc", 0) == (0, 0)
