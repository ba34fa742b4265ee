"""Parse a text once: the syntax trees of the last few texts, and incremental re-parses.

One language-server request parses its text several times (quick fixes, the node at the cursor,
docstring sites, the syntax check of a fill), and an editor sends the whole text again after each
keystroke. A 20,000-line file takes about 150 ms to parse, so parsing from scratch each time made
a request in a big file cost many times the same request in a small one.

:class:`ParseCache` keeps the trees of the last few texts it parsed. A text seen before costs a
lookup. A new text is parsed *incrementally* from the most recent kept tree: the changed region
is found (the common prefix and suffix of the two texts), described to tree-sitter as an edit,
and tree-sitter re-parses only what the change touched. A text with a syntax error is parsed
afresh: there tree-sitter's error recovery can differ between the two (tests/text/test_parse_cache.py
found such a text). So the text after a broken one is parsed afresh at once: it is nearly always
broken too (a fill's canvases while its span is denoised: 647 of 692 in a run of
docs/experiments/parse_replay.py), and an incremental parse of it would be thrown away.

Kept trees are never changed: an incremental parse edits a copy (``Tree.copy``), because a tree
handed out may be read by another thread (the server's model worker). A lock guards the cache.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import AnyStr

import tree_sitter

from infill.errors import InputError
from infill.text.languages import PYTHON, GrammarError, Language, grammar

KEPT = 4
"""Texts whose trees are kept (an editor's open documents, the windows of a request)."""


class ParseCache:
    """The trees of the last :data:`KEPT` texts, for one tree-sitter language."""

    def __init__(self, language: tree_sitter.Language, kept: int = KEPT) -> None:
        self.language = language
        self.kept = kept
        self._trees: OrderedDict[str, tuple[bytes, tree_sitter.Tree]] = OrderedDict()
        self._lock = threading.Lock()

    def parse(self, text: str) -> tuple[bytes, tree_sitter.Node]:
        """The UTF-8 bytes of ``text`` and the root of their syntax tree."""
        with self._lock:
            if text in self._trees:
                self._trees.move_to_end(text)
                data, tree = self._trees[text]
                return data, tree.root_node
            base = self._base()
        data = text.encode("utf-8", "surrogatepass")
        parser = tree_sitter.Parser(self.language)
        tree = parser.parse(data) if base is None else parser.parse(data, edited_copy(*base, data))
        if base is not None and tree.root_node.has_error:
            # tree-sitter's error recovery may differ between an incremental and a fresh parse
            # (Python's scanner keeps string and indent state): a broken text is parsed afresh,
            # so that every caller sees the tree a fresh parse gives.
            tree = parser.parse(data)
        with self._lock:
            self._trees[text] = (data, tree)
            while len(self._trees) > self.kept:
                self._trees.popitem(last=False)
        return data, tree.root_node

    def _base(self) -> tuple[bytes, tree_sitter.Tree] | None:
        """The kept text and tree a new text is parsed from: the most recent, unless it is broken
        (then none: afresh at once; the module docstring says why). Called with the lock held."""
        base = next(reversed(self._trees.values()), None)
        return None if base is None or base[1].root_node.has_error else base


def parse_tree(text: str, language: Language = PYTHON) -> tuple[bytes, tree_sitter.Node]:
    """The UTF-8 bytes of ``text`` and the root of its syntax tree in ``language`` (from that
    language's cache); InputError if the language has no grammar or it does not load."""
    return _cache(language).parse(text)


@functools.cache
def _cache(language: Language) -> ParseCache:
    try:
        return ParseCache(grammar(language))
    except GrammarError as error:
        raise InputError(str(error)) from None


def edited_copy(old: bytes, tree: tree_sitter.Tree, new: bytes) -> tree_sitter.Tree:
    """A copy of ``tree`` (the tree of ``old``) told how ``old`` became ``new``: one edit, from
    the end of their common prefix to the start of their common suffix."""
    start = common_prefix(old, new)
    tail = common_prefix(old[start:][::-1], new[start:][::-1])
    old_end, new_end = len(old) - tail, len(new) - tail
    copy = tree.copy()
    copy.edit(
        start_byte=start,
        old_end_byte=old_end,
        new_end_byte=new_end,
        start_point=point(old, start),
        old_end_point=point(old, old_end),
        new_end_point=point(new, new_end),
    )
    return copy


def common_prefix(a: AnyStr, b: AnyStr) -> int:
    """Length of the longest common prefix of ``a`` and ``b``, texts or bytes (binary search over
    slice comparisons: C-speed, about log2(n) passes)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def point(data: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of byte ``offset`` in ``data``."""
    row = data.count(b"\n", 0, offset)
    return row, offset - (data.rfind(b"\n", 0, offset) + 1)
