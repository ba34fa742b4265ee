"""infill.text.syntax: tree-sitter's problems, and Python's own verdict where tree-sitter sees none."""

from __future__ import annotations

from infill.text.syntax import SYNTAX_ERROR, file_problems, has_syntax_error, syntax_problems


def test_valid_code_has_no_problems_either_way():
    text = "def f(x):\n    if x:\n        return 1\n    return 2\n"
    assert file_problems(text) == syntax_problems(text) == [] and not has_syntax_error(text)


def test_tree_sitter_problems_come_first():
    text = "x = = 1\n"
    assert file_problems(text) == syntax_problems(text) != []


def test_what_tree_sitter_lets_through_python_reports_on_its_line():
    text = "def f(x):\r\n    if x:\r\n    return 2\r\n"  # no indented block after the if
    assert syntax_problems(text) == []
    [problem] = file_problems(text)
    assert problem.code == SYNTAX_ERROR and "indented block" in problem.message
    assert text[problem.start : problem.end] == "    return 2"  # the line, without "\r\n"


def test_an_invalid_escape_is_a_warning_not_a_problem(recwarn):
    assert file_problems('path = "C:\\d"\n') == []
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]


def test_text_python_cannot_parse_at_all_is_one_problem():
    assert file_problems("x = 1\x00\n") != []


def test_python_is_parsed_one_file_at_a_time_across_threads(monkeypatch):
    """CPython 3.11's AST conversion keeps its recursion depth per interpreter: two threads
    parsing at once can fail each other (SystemError). A team server checks its requests' fills
    in a thread each, so every parse goes through one lock."""
    import ast
    import threading
    import time

    from infill.text import syntax

    inside, most = [0], [0]
    real_parse = ast.parse

    def parse(text, *args, **kwargs):  # ast.parse, slowed, counting the parses under way
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.02)  # lets the other threads run: without the lock, they would parse now
        inside[0] -= 1
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(syntax.ast, "parse", parse)
    threads = [threading.Thread(target=syntax.file_problems, args=("x = 1\n",)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
