"""Each API's request as the project's own, and the answers back (team_server.protocols): plain
functions on JSON values, no server."""

from __future__ import annotations

import re

import pytest
from samples import AREA_MODULE, COUNTER_MODULE

from infill import cli
from infill.errors import InputError
from infill.modes import AlternativesRequest, DocstringRequest, FillRequest, FixRequest, InlineRequest
from infill.modes.inline import Completions
from infill.options import REQUEST_OPTIONS, InfillOptions
from infill.text.languages import GO, PYTHON, TEXT
from team_server.protocols import (
    BadRequest,
    Choice,
    Completion,
    cut_at_stop,
    infill_request,
    llama_infill,
    llama_response,
    ollama_generate,
    ollama_response,
    ollama_show,
    openai_completions,
    openai_response,
    options_of,
    split_fim,
)

PREFIX = "def area(width, height):\n    return "
SUFFIX = "\n\nprint(area(2, 3))\n"


@pytest.mark.parametrize(
    "prompt",
    [
        f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        f"<|repo_name|>team/app\n<|file_sep|>app.py\n<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>",
        f"<PRE> {PREFIX} <SUF>{SUFFIX} <MID>",
    ],
    ids=["qwen", "qwen-repo", "starcoder", "codellama"],
)
def test_fim_templates_are_read_back_into_prefix_and_suffix(prompt):
    assert split_fim(prompt) == (PREFIX, SUFFIX)


def test_a_prompt_without_a_template_is_not_split_and_a_begun_middle_stays_in_the_prefix():
    assert split_fim(PREFIX) is None
    assert split_fim("<fim_prefix>a<fim_suffix>b") is None  # no middle sentinel: not a template
    assert split_fim("<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>fo") == ("x = fo", "\n")


def test_openai_completions_take_prompt_and_suffix_or_a_template():
    (plain,), stream = openai_completions({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 24,
                                           "temperature": 0, "stop": "\n\n", "n": 2})  # fmt: skip
    assert (plain.prefix, plain.suffix, plain.max_tokens, plain.temperature) == (PREFIX, SUFFIX, 24, 0.0)
    assert (plain.stop, plain.n, stream) == (("\n\n",), 2, False)
    (fim,), stream = openai_completions({"prompt": f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>",
                                         "stream": True})  # fmt: skip
    assert (fim.prefix, fim.suffix, stream) == (PREFIX, SUFFIX, True)
    two, _ = openai_completions({"prompt": ["a = ", "b = "], "suffix": "\n"})
    assert [(c.prefix, c.suffix) for c in two] == [("a = ", "\n"), ("b = ", "\n")]


@pytest.mark.parametrize(
    "body, says",
    [
        ([], "JSON object"),
        ({}, "prompt"),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": "x", "max_tokens": "8"}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "temperature": 3}, "temperature"),
        ({"prompt": "x", "n": 17}, "n must be"),
        ({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"prompt": "x", "stream": "yes"}, "stream"),
        ({"prompt": "<fim_prefix>a<fim_suffix>b<fim_middle>", "suffix": "c"}, "FIM template"),
    ],
)
def test_openai_completions_refuse_what_the_api_does_not_define(body, says):
    with pytest.raises(BadRequest, match=re.escape(says)):
        openai_completions(body)


def test_a_huge_max_tokens_is_capped():
    (completion,), _ = openai_completions({"prompt": "x", "max_tokens": 100000})
    assert completion.max_tokens == 256


def test_llama_infill_fields():
    completion, stream = llama_infill({
        "input_prefix": "def f(x):\n    ", "input_suffix": "\n", "prompt": "return",
        "input_extra": [{"filename": "b.py", "text": "import os\n"}], "n_predict": 32,
        "t_max_predict_ms": 500, "top_k": 40, "top_p": 0.99, "seed": -1, "cache_prompt": True,
    })  # fmt: skip
    assert (completion.prefix, completion.suffix) == ("def f(x):\n    return", "\n")
    assert (completion.max_tokens, completion.timeout) == (32, 0.5)
    assert (completion.top_k, completion.seed) == (40, None)
    assert stream is False
    unlimited, _ = llama_infill({"input_prefix": "a", "n_predict": -1})
    assert unlimited.max_tokens is None and unlimited.timeout is None
    with pytest.raises(BadRequest, match="input_extra"):
        llama_infill({"input_prefix": "a", "input_extra": "b.py"})


def test_ollama_generate_fields_and_its_default_stream():
    completion, stream = ollama_generate({"model": "m", "prompt": PREFIX, "suffix": SUFFIX,
                                          "options": {"num_predict": 16, "temperature": 0.2, "stop": ["\n"]}})
    assert (completion.prefix, completion.suffix, completion.max_tokens) == (PREFIX, SUFFIX, 16)
    assert (completion.temperature, completion.stop, stream) == (0.2, ("\n",), True)
    raw, stream = ollama_generate({"prompt": f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
                                   "raw": True, "stream": False})  # fmt: skip
    assert (raw.prefix, raw.suffix, stream) == (PREFIX, SUFFIX, False)
    with pytest.raises(BadRequest, match="options"):
        ollama_generate({"prompt": "x", "options": [1]})


def test_a_completion_is_an_insertion_point_between_prefix_and_suffix():
    (request,) = Completion(PREFIX, SUFFIX, max_tokens=12).requests()
    assert isinstance(request, InlineRequest)
    assert request.document.text == PREFIX + SUFFIX and request.offset == len(PREFIX)
    assert request.options.budget == 12 and request.options.sampler.temperature == 0
    crlf = Completion("a = 1\r\nb = ", "\r\n").document()
    assert crlf.newline == "\r\n" and crlf.language is PYTHON
    assert Completion("x", language="go").document().language is GO
    with pytest.raises(InputError, match="NUL"):
        Completion("a\x00b").document()


def test_n_choices_at_a_temperature_are_seeded_requests_and_greedy_ones_one_request():
    seeded = Completion(PREFIX, SUFFIX, temperature=0.8, n=3, seed=7).requests()
    assert [r.options.sampler.seed for r in seeded] == [7, 8, 9]
    greedy = Completion(PREFIX, SUFFIX, n=3)
    (request,) = greedy.requests()
    stats = None
    assert greedy.choices([Completions(["width * height"], stats)]) == [Choice("width * height", False)] * 3
    assert greedy.choices([Completions([], stats)]) == [Choice("", False)] * 3  # a blank fill


def test_tune_sees_the_fields_the_client_set():
    seen = []

    def tune(options: InfillOptions, explicit: frozenset[str]) -> InfillOptions:
        seen.append(explicit)
        return options

    Completion(PREFIX, SUFFIX, temperature=0.0, max_tokens=8).requests(tune)
    Completion(PREFIX, SUFFIX).requests(tune)
    assert seen == [frozenset({"temperature", "budget"}), frozenset()]


def test_stop_strings_cut_the_fill_at_the_first_one():
    assert cut_at_stop("a + b\n\nprint()", ["\n\n", "print"]) == Choice("a + b", True)
    assert cut_at_stop("a + b", ["\n"]) == Choice("a + b", False)
    assert cut_at_stop("a + b", [""]) == Choice("a + b", False)


def test_the_answers_keep_each_apis_fields():
    answer = openai_response("cmpl-1", 5, "m", [Choice("x", False), Choice("y", True)])
    assert answer["object"] == "text_completion" and answer["created"] == 5
    assert [c["text"] for c in answer["choices"]] == ["x", "y"]
    assert {c["finish_reason"] for c in answer["choices"]} == {"stop"} and answer["choices"][1]["index"] == 1
    assert llama_response("m", Choice("x", True)) == {"content": "x", "model": "m", "stop": True,
                                                       "stop_type": "word", "truncated": False}  # fmt: skip
    line = ollama_response("m", "t", "x", False)
    assert line == {"model": "m", "created_at": "t", "response": "x", "done": False}
    done = ollama_response("m", "t", "", True, 12)
    assert done["done_reason"] == "stop" and done["total_duration"] == 12
    from team_server.protocols import ModelInfo

    assert ".Suffix" in ollama_show(ModelInfo("infill", 10_400_000), "t")["template"]


# --------------------------------------------------------------------------- /v1/infill


def test_infill_request_spans_as_lines_offsets_ranges_and_nodes():
    text = COUNTER_MODULE
    asked = infill_request({"text": text, "spans": [{"lines": "6"}, {"lines": [10, 11]}]})
    assert asked.mode == "fill" and isinstance(asked.request, FillRequest)
    assert [text[s.start : s.end] for s in asked.spans] == [
        "    return math.pi * radius ** 2", "    total = 0\n    for value in values:"]  # fmt: skip
    start = text.index("math.pi")
    spans = [{"start": start, "end": start + 7}, {"range": "10:5-10:10"}, {"node": "body:mean"}]
    asked = infill_request({"text": text, "spans": spans})
    assert [text[s.start : s.end][:9] for s in asked.spans] == ["math.pi", "total", "    total"]


def test_infill_request_modes():
    fix = infill_request({"text": COUNTER_MODULE, "spans": [{"lines": 6}], "mode": "fix",
                          "options": {"fixThreshold": 0.1, "retries": 1}})  # fmt: skip
    assert isinstance(fix.request, FixRequest)
    assert (fix.request.options.threshold, fix.request.options.retries) == (0.1, 1)
    doc = infill_request({"text": AREA_MODULE, "mode": "document"})
    assert isinstance(doc.request, DocstringRequest)
    assert [s.name for s in doc.request.sites] == ["function circle"]
    alternatives = infill_request({"text": AREA_MODULE, "spans": [{"lines": 5}], "mode": "alternatives",
                                   "n": 4})  # fmt: skip
    assert isinstance(alternatives.request, AlternativesRequest) and alternatives.request.n == 4
    one_line = {"text": "x = 1\n", "spans": [{"lines": 1}]}
    assert infill_request({**one_line, "path": "a.go"}).document.language is GO
    assert infill_request({**one_line, "language": "cobol"}).document.language is TEXT


@pytest.mark.parametrize(
    "body, error, says",
    [
        ("text", BadRequest, "JSON object"),
        ({"spans": [{"lines": 1}]}, BadRequest, "text"),
        ({"text": "x\n", "spans": [{"lines": 1}], "mode": "rewrite"}, BadRequest, "mode must be one of"),
        ({"text": "x\n"}, BadRequest, "say what to regenerate"),
        ({"text": "x\n", "spans": [{"lines": 5}]}, InputError, "past the end"),
        ({"text": "x\n", "spans": [{"start": 0, "end": 9}]}, BadRequest, "offsets"),
        ({"text": "x\n", "spans": [{"cols": 1}]}, BadRequest, "each span"),
        ({"text": "x\n", "spans": [{"lines": 1}], "options": {"steps": "many"}}, BadRequest, "options.steps"),
        ({"text": "x\n", "spans": [{"lines": 1}], "options": {"steps": 0}}, InputError, "steps"),
        ({"text": "x\n", "spans": [{"lines": 1}], "options": {"syntaxRounds": 1}}, BadRequest,
         "unknown option"),
        ({"text": "x\n", "spans": [{"lines": 1}] * 2, "mode": "alternatives"}, BadRequest, "one span"),
        ({"text": "x\n", "mode": "document", "language": "text"}, BadRequest, "grammar"),
    ],
)
def test_infill_request_refusals(body, error, says):
    with pytest.raises(error, match=re.escape(says)):
        infill_request(body)


def test_options_pass_budget_zero_is_no_bound_and_unset_options_keep_the_defaults():
    options, threshold = options_of({"passBudget": 0, "temperature": 1, "recall": False})
    assert options.pass_budget is None and options.sampler.temperature == 1.0 and options.recall is False
    assert threshold is None
    assert options_of(None)[0] == InfillOptions()


def test_every_option_is_the_camel_case_of_its_field_and_of_its_cli_flag():
    """One name per setting (tests/project/test_setting_names.py): the server's option `tokenEdits`
    sets InfillOptions.token_edits, as `infill --token-edits` does."""
    flags = {option: action for action in cli.build_parser()._actions for option in action.option_strings}
    for key, (where, name, _) in REQUEST_OPTIONS.items():
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()
        flag = "--" + snake.replace("_", "-")
        if where == "fix":
            assert (snake, flag) == (f"fix_{name}", "--fix-threshold")
            continue
        assert snake == name, key
        action = flags.get(flag) or flags.get("--no-" + flag[2:])
        assert action is not None and action.dest == name, key
