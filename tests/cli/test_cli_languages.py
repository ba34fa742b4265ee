"""`infill` on files of every language: the shipped model and a tiny published-format checkpoint
fill them; bytes outside the span never change (CRLF, tabs, BOM kept); the language is said once."""

from __future__ import annotations

import json

import pytest
from checkpoints import write_checkpoint
from language_samples import SAMPLES
from samples import LEAKS

from infill.cli import EXIT_INPUT, main
from infill.text.languages import named
from infill.text.spans import line_span

NO_REPAIR = ("--retries", "0", "--token-edits", "0", "--fresh-fills", "0")  # time, not behaviour


def fill_and_check(tmp_path, capsys, name: str, data_of=lambda text: text.encode(), *extra: str) -> str:
    """Fill one line of the body of the sample of `name` with --write; check the bytes outside
    that line; return stderr."""
    file_name, source, chosen = SAMPLES[name]
    selector = next(s for s in chosen if s.startswith("body:"))
    line = source[: source.index(chosen[selector])].count("\n") + 1  # the body's first line
    path = tmp_path / file_name
    data = data_of(source)
    path.write_bytes(data)
    span = line_span(source, line, line)
    assert main([str(path), "--lines", str(line), "--write", "--seed", "1", "--steps", "8", *extra]) == 0
    captured = capsys.readouterr()
    after = path.read_bytes()
    prefix, suffix = data_of(source[: span.start]), data_of(source[span.end :])
    assert after.startswith(prefix) and after.endswith(suffix), captured.err
    middle = after[len(prefix) : len(after) - len(suffix)]
    if b"\r\n" in data:  # the fill's line breaks (it may write several lines) are the file's
        assert b"\n" not in middle.replace(b"\r\n", b"") and b"\r" not in middle.replace(b"\r\n", b"")
    for leak in LEAKS:
        assert leak.encode() not in after
    assert "syntax error" not in captured.err and "Traceback" not in captured.err
    return captured.err


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in SAMPLES if name != "python"])
def test_the_shipped_model_fills_each_language_and_says_once_it_knows_only_python(tmp_path, capsys, name):
    err = fill_and_check(tmp_path, capsys, name)
    title = named(name).title
    assert err.count(f"trained on Python only; for useful {title} text use a published model") == 1


def test_go_tabs_and_crlf_are_kept(tmp_path, capsys):
    crlf = lambda text: text.replace("\n", "\r\n").encode()  # noqa: E731
    fill_and_check(tmp_path, capsys, "go", crlf)
    after = (tmp_path / "geometry.go").read_bytes()
    assert b"\tX, Y float64\r\n" in after and after.count(b"\r\n") == after.count(b"\n")


def test_a_published_format_checkpoint_fills_typescript_and_go(tmp_path_factory, tmp_path, capsys):
    model = tmp_path_factory.mktemp("dream") / "Dream"
    write_checkpoint(model, "Dream")
    for name in ("typescript", "go"):
        err = fill_and_check(tmp_path, capsys, name, str.encode, "--model", str(model), *NO_REPAIR)
        assert "trained on Python only" not in err  # a published model: nothing to say


def test_node_selectors_and_json_through_the_cli(tmp_path, capsys):
    file_name, source, chosen = SAMPLES["typescript"]
    path = tmp_path / file_name
    path.write_text(source)
    assert main([str(path), "--node", "body:total", "--json", "--steps", "4", "--fresh-fills", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    start = source.index(chosen["body:total"])
    end = start + len(chosen["body:total"])
    assert report["spans"][0]["label"] == "body of function total"
    for edit in report["edits"]:
        assert start <= edit["start"] <= edit["end"] <= end
    assert path.read_text() == source


def test_language_flag_overrides_the_extension_and_unknown_languages_are_text(tmp_path, capsys):
    _, source, _ = SAMPLES["go"]
    path = tmp_path / "geometry.txt"
    path.write_text(source)
    assert main([str(path), "--node", "body:Distance", "--language", "go", "--steps", "2", *NO_REPAIR]) == 0
    capsys.readouterr()
    assert main([str(path), "--node", "body:Distance"]) == EXIT_INPUT
    assert "--node needs a language with a grammar" in capsys.readouterr().err
    unknown = tmp_path / "geometry.cob"
    unknown.write_text(source)
    assert main([str(unknown), "--lines", "3", "--steps", "2", *NO_REPAIR]) == 0
    err = capsys.readouterr().err
    assert err.count("filled as text") == 1 and "trained on Python only" not in err
    assert unknown.read_text() == source


def test_document_writes_each_language_s_convention_through_the_cli(tmp_path, capsys):
    file_name, source, _ = SAMPLES["go"]
    path = tmp_path / file_name
    path.write_bytes(source.replace("\n", "\r\n").encode())
    assert main([str(path), "--document", "--write", "--steps", "8"]) == 0
    after = path.read_bytes().decode()
    assert "\n" not in after.replace("\r\n", "") and "\tX, Y float64\r\n" in after
    from infill.text.syntax import has_syntax_error

    assert not has_syntax_error(after, named("go"))
    added = [line for line in after.split("\r\n") if line not in source.split("\n")]
    assert added and all(line.startswith("//") for line in added), added
    firsts = [line.split()[1] for i, line in enumerate(after.split("\r\n"))
              if line in added and not after.split("\r\n")[i - 1].startswith("//")]  # fmt: skip
    assert set(firsts) <= {"Norm", "Distance"}, firsts  # a Go doc comment starts with the name
    for line in added:  # each comment is directly above its declaration
        below = after.split("\r\n")[after.split("\r\n").index(line) + 1]
        assert below.startswith(("//", "func ", "type "))
    capsys.readouterr()
    text = tmp_path / "notes.txt"
    text.write_text("def f():\n    pass\n")
    assert main([str(text), "--document"]) == EXIT_INPUT
    assert "--document needs a language with a grammar" in capsys.readouterr().err
