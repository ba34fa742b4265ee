"""initializationOptions -> server settings -> engine options."""

from __future__ import annotations

from lsp_server.settings import Settings, parse_settings


def test_recognised_options():
    options = {"modelPath": "/models/m", "steps": 12, "temperature": 0, "contextLength": 256, "threads": 2}
    settings, warnings = parse_settings(options)
    assert warnings == []
    assert settings == Settings("/models/m", 12, 0.0, 256, 2)
    engine = settings.infill_options()
    assert (engine.sampler.steps, engine.sampler.temperature, engine.context_length) == (12, 0.0, 256)


def test_missing_options_keep_the_engine_defaults():
    assert parse_settings(None) == (Settings(), [])
    settings, warnings = parse_settings({"unknown": 1})
    assert (settings, warnings) == (Settings(), [])
    assert settings.infill_options().context_length is None


def test_bad_values_are_ignored_with_a_warning():
    settings, warnings = parse_settings({"steps": "many", "temperature": -1, "threads": True, "modelPath": 3})
    assert settings == Settings()
    assert len(warnings) == 4 and "initializationOptions.steps should be a positive integer" in warnings[1]
    expected = ["initializationOptions should be an object, got list"]
    assert parse_settings(["not", "an", "object"])[1] == expected
