"""infill-lsp end to end (pytest-lsp): fix, docstring and alternatives actions, change annotations.

Real server processes over stdio with tiny randomly initialised models: ``tiny`` (its fills are
gibberish, and it believes every visible token, so a repair finds nothing to fix) and
``contrarian`` (the same with its output negated: it disbelieves every visible token, so a
repair rewrites as many as it may). What is checked is the protocol and the mechanics: which
actions are offered, that fixes are repairs (minimal edits, the rest untouched), where docstrings
go, that alternatives are sampled once and offered ranked as separate resolved actions that
follow the document's versions, and that edits are annotated for clients that support it.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
import pytest_lsp
from lsp_support import (
    CONTENT_MODIFIED,
    SERVER,
    change_document,
    contrarian_model_dir,
    initialize_params,
    list_actions,
    open_document,
    tiny_model_dir,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from infill.text.edits import TextEdit, apply_edits
from infill.text.syntax import has_syntax_error
from lsp_server.positions import offset_to_position, position_to_offset

# external: the language server, as another process
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.external]

SOURCE = (
    "import math\n"
    "\n"
    "\n"
    "def area(radius):\n"
    "    return math.pi * radius ** 2\n"
    "\n"
    "\n"
    "class Shape:\n"
    "    def __init__(self, sides):\n"
    "        self.sides = sides\n"
)
BROKEN = SOURCE.replace("radius ** 2", "radius ** = 2")
FIX = "refactor.rewrite.infill.fix"
ALTERNATIVES = "refactor.rewrite.infill.alternatives"
DOCSTRING = "refactor.rewrite.infill.docstring"
FILE_DOCSTRINGS = "source.infill.docstrings"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def contrarian_model(tmp_path_factory) -> pathlib.Path:
    return contrarian_model_dir(tmp_path_factory)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tiny_model):
    """VS Code's capabilities: change annotations supported."""
    options = {"modelPath": str(tiny_model), "threads": 1, "steps": 8}
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, scope="module")
async def plain_client(lsp_client: LanguageClient, contrarian_model):
    """VS Code's capabilities without change annotations; the contrarian model, no syntax retries
    (what a repair itself does is checked here; retries re-draw whole lines:
    tests/engine/test_repair_stage.py)."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.workspace.workspace_edit.change_annotation_support = None
    options = {"modelPath": str(contrarian_model), "threads": 1, "steps": 8, "retries": 0}
    await lsp_client.initialize_session(initialize_params(capabilities, options))
    yield
    await lsp_client.shutdown_session()


# ------------------------------------------------------------------------------------ helpers


def at(text: str, offset: int) -> types.Position:
    return offset_to_position(text, offset)


def document_edits(action: types.CodeAction, uri: str, version: int) -> list:
    assert action.edit is not None
    [document_edit] = action.edit.document_changes
    assert document_edit.text_document.uri == uri and document_edit.text_document.version == version
    return list(document_edit.edits)


def as_offsets(text: str, edits) -> list[TextEdit]:
    return [
        TextEdit(position_to_offset(text, e.range.start), position_to_offset(text, e.range.end), e.new_text)
        for e in edits
    ]


def apply(text: str, edits) -> str:
    return apply_edits(text, as_offsets(text, edits))


def assert_annotated(action: types.CodeAction, description: str) -> None:
    """Every edit is annotated "infill", an annotation that needs confirmation."""
    for edit in action.edit.document_changes[0].edits:
        assert isinstance(edit, types.AnnotatedTextEdit) and edit.annotation_id == "infill"
    annotation = action.edit.change_annotations["infill"]
    assert annotation.label == "infill" and annotation.needs_confirmation is True
    assert re.match(description, annotation.description), annotation.description


def assert_plain(action: types.CodeAction) -> None:
    for edit in action.edit.document_changes[0].edits:
        assert not isinstance(edit, types.AnnotatedTextEdit)
    assert not action.edit.change_annotations


async def actions_of(client, uri, text, start, end=None, kind=None):
    listed = await list_actions(client, uri, at(text, start), at(text, start if end is None else end))
    return [action for action in listed if kind is None or action.kind == kind]


# ------------------------------------------------------------------------------------ listing


async def test_the_new_kinds_are_advertised_and_listed_unresolved(client: LanguageClient):
    kinds = client.initialize_result.capabilities.code_action_provider.code_action_kinds
    assert {FIX, ALTERNATIVES, DOCSTRING, FILE_DOCSTRINGS} <= set(kinds)
    uri = "file:///project/listing.py"
    open_document(client, uri, SOURCE)
    cursor = SOURCE.index("radius ** 2")
    listed = await actions_of(client, uri, SOURCE, cursor)
    assert [(a.title, a.kind) for a in listed] == [
        ("Infill: fill expression on line 5", "refactor.rewrite.infill.node"),
        ("Infill: fix statement on line 5", FIX),
        ("Infill: add docstring to function area", DOCSTRING),
        ("Infill: add missing docstrings in file (3)", FILE_DOCSTRINGS),
    ]
    assert all(a.edit is None for a in listed)
    start, end = SOURCE.index("math.pi"), SOURCE.index(" ** 2")
    titles = [a.title for a in await actions_of(client, uri, SOURCE, start, end)]
    assert titles[:4] == [
        "Infill: fill selection",
        "Infill: fill statement on line 5",
        "Infill: fix selection",
        "Infill: fill selection (3 alternatives)",  # the default "alternatives" setting
    ]


async def test_every_new_action_listed_before_a_change_is_refused_after_it(client: LanguageClient):
    uri = "file:///project/stale-modes.py"
    open_document(client, uri, SOURCE)
    start, end = SOURCE.index("math.pi"), SOURCE.index(" ** 2")
    listed = await actions_of(client, uri, SOURCE, start, end)
    listed += await actions_of(client, uri, SOURCE, start)
    modes = {a.data["mode"] for a in listed}
    assert {"fix", "document", "alternative"} <= modes
    change_document(client, uri, 2, "# edited\n" + SOURCE)
    for action in listed:
        with pytest.raises(JsonRpcException) as refused:
            await client.code_action_resolve_async(action)
        assert refused.value.code == CONTENT_MODIFIED and "version 1 -> 2" in refused.value.message


# ------------------------------------------------------------------------------------ fix


async def test_fix_repairs_only_unlikely_tokens_with_minimal_edits(plain_client: LanguageClient):
    uri = "file:///project/fix.py"
    open_document(plain_client, uri, SOURCE)
    cursor = SOURCE.index("radius ** 2")
    [fix] = await actions_of(plain_client, uri, SOURCE, cursor, kind=FIX)
    start, end = fix.data["start"], fix.data["end"]
    assert SOURCE[start:end] == "    return math.pi * radius ** 2" and fix.data["mode"] == "fix"

    resolved = await plain_client.code_action_resolve_async(fix)
    edits = document_edits(resolved, uri, 1)
    assert_plain(resolved)  # this client declared no change annotation support
    assert edits, "the contrarian model disbelieves every token: something is re-predicted"
    replaced = 0
    for edit in as_offsets(SOURCE, edits):
        assert start <= edit.start <= edit.end <= end
        replaced += edit.end - edit.start
    # A repair flags at most a quarter of the tokens: not the whole statement, as a fill would.
    assert 0 < replaced <= (end - start) // 2
    fixed = apply(SOURCE, edits)
    assert fixed.startswith(SOURCE[:start]) and fixed.endswith(SOURCE[end:])


async def test_a_fix_that_finds_nothing_changes_nothing_and_says_so(client: LanguageClient):
    uri = "file:///project/fix-nothing.py"
    open_document(client, uri, SOURCE)
    [fix] = await actions_of(client, uri, SOURCE, SOURCE.index("radius ** 2"), kind=FIX)
    shown = len(client.messages)
    resolved = await client.code_action_resolve_async(fix)
    assert document_edits(resolved, uri, 1) == []  # the tiny model believes every token
    [message] = client.messages[shown:]  # sent before the answer
    assert message.type == types.MessageType.Info
    assert message.message == (
        "infill: Infill: fix statement on line 5: no change (the model found no unlikely token)"
    )
    assert_annotated(resolved, r"fix statement on line 5: 0 unlikely token\(s\) re-predicted")


async def test_the_syntax_error_quick_fix_repairs_the_statement(plain_client: LanguageClient):
    uri = "file:///project/quickfix-repair.py"
    open_document(plain_client, uri, BROKEN)
    error = BROKEN.index("= 2")
    [quick_fix] = await actions_of(plain_client, uri, BROKEN, error, kind="quickfix")
    assert quick_fix.title == "Infill: fix syntax error (repair statement on line 5)"
    assert quick_fix.data["mode"] == "fix" and quick_fix.diagnostics
    fixes = await actions_of(plain_client, uri, BROKEN, error, kind=FIX)
    assert fixes == []  # "fix statement on line 5" would repair the same span: offered once
    start, end = quick_fix.data["start"], quick_fix.data["end"]

    edits = document_edits(await plain_client.code_action_resolve_async(quick_fix), uri, 1)
    assert edits
    replaced = sum(e.end - e.start for e in as_offsets(BROKEN, edits))
    assert all(start <= e.start <= e.end <= end for e in as_offsets(BROKEN, edits))
    assert replaced <= (end - start) // 2


async def test_a_missing_token_quick_fix_fills_with_annotated_edits(client: LanguageClient):
    uri = "file:///project/quickfix-fill.py"
    text = SOURCE.replace("def area(radius):", "def area(:")
    open_document(client, uri, text)
    cursor = text.index("(:") + 1
    [quick_fix] = await actions_of(client, uri, text, cursor, kind="quickfix")
    assert quick_fix.data["mode"] == "fill"  # a repair cannot insert the missing ")"
    assert quick_fix.title.startswith("Infill: fix syntax error (fill ")
    resolved = await client.code_action_resolve_async(quick_fix)
    edits = document_edits(resolved, uri, 1)
    assert edits
    assert_annotated(resolved, r"fill (statement on )?lines? [\d-]+: \d+ denoising step\(s\)")
    start, end = quick_fix.data["start"], quick_fix.data["end"]
    assert all(start <= e.start <= e.end <= end for e in as_offsets(text, edits))


# ------------------------------------------------------------------------------------ docstrings


async def test_add_docstring_inserts_one_below_the_header_at_the_body_indentation(client: LanguageClient):
    uri = "file:///project/docstring.py"
    open_document(client, uri, SOURCE)
    cursor = SOURCE.index("self.sides")
    [action] = await actions_of(client, uri, SOURCE, cursor, kind=DOCSTRING)
    assert action.title == "Infill: add docstring to function Shape.__init__"
    resolved = await client.code_action_resolve_async(action)
    [edit] = document_edits(resolved, uri, 1)
    header_end = SOURCE.index("sides):") + len("sides):")
    assert edit.range.start == edit.range.end == at(SOURCE, header_end)
    assert re.fullmatch(r'\n        r?""".+"""', edit.new_text, re.DOTALL), edit.new_text
    documented = apply(SOURCE, [edit])
    tree = ast.parse(documented)
    init = tree.body[2].body[0]
    assert ast.get_docstring(init, clean=False) is not None
    assert ast.get_docstring(tree.body[1]) is None  # area() untouched
    assert_annotated(resolved, r"1 of 1 docstring\(s\) written \(function Shape.__init__\)")


async def test_add_missing_docstrings_in_file_documents_every_definition(client: LanguageClient):
    uri = "file:///project/docstrings.py"
    open_document(client, uri, SOURCE)
    [action] = await actions_of(client, uri, SOURCE, 0, kind=FILE_DOCSTRINGS)
    assert action.data["kind"] == "file"
    resolved = await client.code_action_resolve_async(action)
    edits = document_edits(resolved, uri, 1)
    assert len(edits) == 3 and all(e.range.start == e.range.end for e in edits)  # insertions only
    tree = ast.parse(apply(SOURCE, edits))
    area, shape = tree.body[1], tree.body[2]
    for node in (area, shape, shape.body[1]):
        assert ast.get_docstring(node, clean=False) is not None
    indents = sorted(e.new_text.split('"""')[0].lstrip("\nr") for e in edits)
    assert sorted(re.sub("r$", "", indent) for indent in indents) == ["    ", "    ", "        "]


# ------------------------------------------------------------------------------------ alternatives


def alternative_numbers(actions) -> list[tuple[int, int, float]]:
    """(rank, of, score) from "Infill: alternative 2 of 3 (score -5.12)" titles."""
    found = []
    for action in actions:
        match = re.fullmatch(r"Infill: alternative (\d+) of (\d+) \(score (-?\d+\.\d+)\)", action.title)
        assert match, action.title
        found.append((int(match[1]), int(match[2]), float(match[3])))
    return found


async def test_alternatives_are_sampled_once_and_offered_ranked_as_they_are_applied(client: LanguageClient):
    uri = "file:///project/alternatives.py"
    open_document(client, uri, SOURCE)
    start = SOURCE.index("math.pi")
    end = start + len("math.pi * radius ** 2")
    before, after = SOURCE[:start], SOURCE[end:]
    [several] = await actions_of(client, uri, SOURCE, start, end, kind=ALTERNATIVES)
    assert several.title == "Infill: fill selection (3 alternatives)" and several.edit is None

    reports = set(client.progress_reports)
    resolved = await client.code_action_resolve_async(several)
    [token] = set(client.progress_reports) - reports  # one job: one batch, not one run per candidate
    assert client.progress_reports[token][-1].message == "done"
    assert_annotated(resolved, r"alternative 1 of (\d+) \(3 sampled in one batch\), score -?\d+\.\d+")
    count = int(re.search(r"of (\d+)", resolved.edit.change_annotations["infill"].description)[1])
    assert 2 <= count <= 3  # distinct candidates of a random model at temperature 0.8
    best = apply(SOURCE, document_edits(resolved, uri, 1))
    assert best.startswith(before) and best.endswith(after)

    # The client applies the best candidate: the others are offered over the span, resolved.
    change_document(client, uri, 2, best)
    span_end = len(best) - len(after)
    offered = await actions_of(client, uri, best, start, kind=ALTERNATIVES)
    assert all(a.edit is not None for a in offered)
    numbers = alternative_numbers(offered)
    assert [n[:2] for n in numbers] == [(rank, count) for rank in range(2, count + 1)]
    parsing = [not has_syntax_error(apply(best, document_edits(a, uri, 2))) for a in offered]
    keys = [(parses, n[2]) for parses, n in zip(parsing, numbers)]  # syntax-keeping first, then score
    assert keys == sorted(keys, reverse=True)
    assert await actions_of(client, uri, best, 0, kind=ALTERNATIVES) == []  # away from the span
    second = offered[0]
    second_text = apply(best, document_edits(second, uri, 2))
    assert second_text.startswith(before) and second_text.endswith(after) and second_text != best
    assert all(
        start <= e.start <= e.end <= span_end for e in as_offsets(best, second.edit.document_changes[0].edits)
    )

    # It applies alternative 2: alternative 1 (the best) is offered now, instead of 2.
    change_document(client, uri, 3, second_text)
    offered = await actions_of(client, uri, second_text, start, kind=ALTERNATIVES)
    assert [n[0] for n in alternative_numbers(offered)] == [1, *range(3, count + 1)]
    back = apply(second_text, document_edits(offered[0], uri, 3))
    assert back == best
    with pytest.raises(JsonRpcException) as refused:  # listed for version 2
        await client.code_action_resolve_async(second)
    assert refused.value.code == CONTENT_MODIFIED

    # Any other change makes them stale: gone.
    change_document(client, uri, 4, "# typed\n" + second_text)
    moved = len("# typed\n")
    assert await actions_of(client, uri, "# typed\n" + second_text, start + moved, kind=ALTERNATIVES) == []
