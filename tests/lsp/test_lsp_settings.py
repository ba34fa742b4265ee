"""initializationOptions and configuration -> server settings -> engine options; document jobs."""

from __future__ import annotations

from lsprotocol import types

from infill.options import InfillOptions
from lsp_server.jobs import INLINE, DocumentJobs
from lsp_server.settings import Settings, parse_settings, renamed_notices, section_of


def test_recognised_options():
    options = {"modelPath": "/models/m", "steps": 12, "temperature": 0, "contextLength": 256, "threads": 2}
    settings, warnings = parse_settings(options)
    assert warnings == []
    assert settings == Settings("/models/m", 12, 0.0, 256, 2)
    engine = settings.infill_options()
    assert (engine.sampler.steps, engine.sampler.temperature, engine.context_length) == (12, 0.0, 256)
    quiet, warnings = parse_settings({"retries": 0})
    assert warnings == [] and quiet.infill_options().retries == 0
    assert parse_settings({"retries": -1})[1] == [
        "initializationOptions.retries should be an integer >= 0, got -1: ignored"
    ]
    assert parse_settings({"passBudget": 50})[0].infill_options().pass_budget == 50
    assert parse_settings({"passBudget": 0})[0].infill_options().pass_budget is None  # no bound
    assert parse_settings({})[0].infill_options().pass_budget == InfillOptions().pass_budget
    assert parse_settings({"passBudget": -1})[1] == [
        "initializationOptions.passBudget should be an integer >= 0, got -1: ignored"
    ]


def test_the_repair_settings_have_the_names_of_their_options_fields():
    settings, warnings = parse_settings({"retries": 1, "tokenEdits": 2, "freshFills": 3, "passBudget": 40})
    options = settings.infill_options()
    assert warnings == [] and (options.retries, options.token_edits, options.fresh_fills) == (1, 2, 3)
    assert options.pass_budget == 40


def test_old_setting_names_are_still_read_and_name_the_new_one():
    settings, warnings = parse_settings({"syntaxRounds": 1, "syntaxEdits": 2, "syntaxRestarts": 3})
    options = settings.infill_options()
    assert warnings == [] and (options.retries, options.token_edits, options.fresh_fills) == (1, 2, 3)
    assert renamed_notices({"syntaxRounds": 1, "syntaxEdits": None, "steps": 3}) == [
        "the setting infill.syntaxRounds is deprecated: use infill.retries "
        "(the old name is read only where the new one is not set)"
    ]
    assert renamed_notices({"retries": 1}) == [] and renamed_notices(None) == []
    # the new name wins; a bad value is reported under the name it was given
    assert parse_settings({"syntaxRounds": 1, "retries": 2})[0].retries == 2
    assert parse_settings({"syntaxEdits": -1})[1] == [
        "initializationOptions.syntaxEdits should be an integer >= 0, got -1: ignored"
    ]
    assert section_of({"syntaxRestarts": 0}) == {"syntaxRestarts": 0}  # a bare section of old names


def test_the_server_says_once_per_old_name_which_name_to_use():
    from lsp_server.server import InfillLanguageServer

    server = InfillLanguageServer()
    shown = []
    server.window_show_message = lambda params: shown.append((params.type, params.message))
    server.apply_settings({"syntaxRounds": 0, "syntaxRestarts": 1}, "configuration 'infill'")
    server.apply_settings({"syntaxRounds": 2, "retries": 1}, "configuration 'infill'")  # again: not shown
    assert server.settings.retries == 1 and server.settings.fresh_fills is None
    assert [message for _, message in shown] == [
        "infill: the setting infill.syntaxRounds is deprecated: use infill.retries "
        "(the old name is read only where the new one is not set)",
        "infill: the setting infill.syntaxRestarts is deprecated: use infill.freshFills "
        "(the old name is read only where the new one is not set)",
    ]
    assert {kind for kind, _ in shown} == {types.MessageType.Warning}


def test_missing_options_keep_the_engine_defaults():
    assert parse_settings(None) == (Settings(), [])
    assert parse_settings([]) == (Settings(), [])  # an empty Lua table arrives as []
    settings, warnings = parse_settings({"unknown": 1})
    assert (settings, warnings) == (Settings(), [])
    assert settings.infill_options().context_length is None
    assert settings.infill_options().retries == InfillOptions().retries


def test_bad_values_are_ignored_with_a_warning():
    settings, warnings = parse_settings({"steps": "many", "temperature": -1, "threads": True, "modelPath": 3})
    assert settings == Settings()
    assert len(warnings) == 4 and "initializationOptions.steps should be a positive integer" in warnings[1]
    expected = ["initializationOptions should be an object, got list"]
    assert parse_settings(["not", "an", "object"])[1] == expected


def test_configuration_overrides_the_initial_settings_key_by_key():
    initial, _ = parse_settings({"modelPath": "/models/a", "steps": 12, "threads": 1})
    configured, warnings = parse_settings(
        {"steps": 40, "temperature": 0.5, "alternatives": 3, "contextLength": 64, "steps2": 1},
        initial,
        "configuration 'infill'",
    )
    assert warnings == []
    assert configured == Settings("/models/a", 40, 0.5, 64, 1, 3)
    assert initial.model_key() == configured.model_key()
    assert initial.model_key() != parse_settings({"modelPath": "/models/b"}, initial)[0].model_key()
    assert parse_settings(None, initial) == (initial, [])
    assert parse_settings({"alternatives": 0}, initial, "configuration 'infill'") == (
        initial,
        ["configuration 'infill'.alternatives should be an integer from 1 to 16, got 0: ignored"],
    )


def test_section_of_a_did_change_configuration_payload():
    assert section_of({"infill": {"steps": 3}, "python": {}}) == {"steps": 3}
    assert section_of({"steps": 3}) == {"steps": 3}
    assert section_of({"python": {}}) is None
    assert section_of(None) is None


def test_a_newer_job_supersedes_the_older_one_of_the_same_document():
    jobs = DocumentJobs()
    first = jobs.start("file:///a.py")
    other = jobs.start("file:///b.py")
    assert not first.cancelled() and jobs.running("file:///a.py") is first
    second = jobs.start("file:///a.py")
    assert first.cancelled() and first.superseded
    assert not second.cancelled() and not other.cancelled()
    jobs.finish(first)  # the old one ends after the new one started: the new one stays
    assert jobs.running("file:///a.py") is second
    jobs.finish(second)
    assert jobs.running("file:///a.py") is None and jobs.running("file:///b.py") is other


def test_jobs_of_other_kinds_do_not_supersede_each_other():
    jobs = DocumentJobs()
    fill = jobs.start("file:///a.py")
    completion = jobs.start("file:///a.py", INLINE)
    assert not fill.cancelled() and jobs.running("file:///a.py", INLINE) is completion
    newer_completion = jobs.start("file:///a.py", INLINE)
    assert completion.superseded and not fill.cancelled()
    assert set(map(id, jobs.of_document("file:///a.py"))) == {id(fill), id(newer_completion)}


def test_idle_refresh_is_a_number_of_seconds_and_0_turns_it_off():
    assert parse_settings({})[0].idle_refresh == 0.5
    assert parse_settings({"idleRefresh": 0})[0].idle_refresh == 0.0
    assert parse_settings({"idleRefresh": 2})[0].idle_refresh == 2.0
    settings, warnings = parse_settings({"idleRefresh": -1})
    assert settings.idle_refresh == 0.5 and "idleRefresh" in warnings[0]


def test_the_change_offset_is_where_a_full_text_sync_first_differs():
    from lsp_server.idle import change_offset

    old = "def f():\n    return 1\n" * 50
    at = old.index("return 1", 500)
    assert change_offset(old, old[:at] + "return 2" + old[at + 8 :]) == at + 7
    assert change_offset(old, old[:at] + old[at + 9 :]) == at  # a deletion
    assert change_offset(old, old + "x") == len(old) and change_offset(old, old) == len(old)
    assert change_offset("", "abc") == 0


def test_block_settings_reach_the_sampler_and_block_passes_need_blocks():
    options = parse_settings({"blockLength": 4, "blockPasses": True})[0].infill_options()
    assert (options.sampler.block_length, options.sampler.block_passes) == (4, True)
    alone = parse_settings({"blockPasses": True})[0].infill_options()  # no blocks: nothing to focus on
    assert (alone.sampler.block_length, alone.sampler.block_passes) == (None, False)
    assert parse_settings({"blockLength": 0})[1] == [
        "initializationOptions.blockLength should be a positive integer, got 0: ignored"
    ]
