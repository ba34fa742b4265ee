"""One name per setting, in every layer: the options' fields (infill.options), the CLI's flags
(infill.cli), the server's settings (lsp_server/settings.py), the VS Code extension's settings
(editors/vscode/package.json, src/logic.ts) and the editors' documentation. `tokenEdits` is
`InfillOptions.token_edits`, `--token-edits` and `infill.tokenEdits`; the old names that are
still read (RENAMED) are the same rename in each layer."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path

from infill import cli
from infill.bench.quality import REPAIR_FLAGS
from infill.engine.repair import RepairPolicy
from infill.options import FixOptions, InfillOptions, SamplerConfig
from lsp_server import settings

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
MANIFEST = json.loads((VSCODE / "package.json").read_text())
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]
LOGIC = (VSCODE / "src" / "logic.ts").read_text()
CLIENT_ONLY = {"serverPath", "serverArgs", "inlineCompletion"}  # the extension's own settings
CLI_NAMED_OTHERWISE = {  # server-only keys whose CLI flag (if any) is another setting's name; why:
    "modelPath": "--model",  # the flag came first and takes names too; renaming would touch every doc
    "requestTimeout": "--timeout",  # not the same setting: a deadline for the whole command
    "idleRefresh": None,  # the server's kept context only
    "languages": None,  # --language is the file's language, not the languages served
    "reviewThreshold": "--fix-threshold",  # `infill review`'s threshold is fix mode's flag
    "reviewMaxPerFile": None,  # the diagnostics an editor shows; `infill review` lists them all
    "endpoint": "--server",  # issue 38 names both: `infill FILE --server URL`, the setting `endpoint`
    "token": "--token-file",  # a token on the command line would show in `ps`: the CLI reads a file
}


def snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def flag(key: str) -> str:
    return "--" + snake(key).replace("_", "-")


def option_fields() -> set[str]:
    """The fields of a request's options: InfillOptions' and its SamplerConfig's."""
    fields = [*dataclasses.fields(InfillOptions), *dataclasses.fields(SamplerConfig)]
    return {f.name for f in fields} - {"sampler", "authors"}


def cli_flags() -> dict[str, argparse.Action]:
    """The CLI's actions by their flags (the long ones)."""
    actions = cli.build_parser()._actions
    return {option: action for action in actions for option in action.option_strings if option[:2] == "--"}


def test_every_server_setting_is_an_options_field_or_a_listed_server_only_one():
    for key, (field, _, _) in settings._KEYS.items():
        assert field == snake(key), f"server key {key} fills Settings.{field}"
        assert snake(key) in option_fields() or key in settings.SERVER_ONLY, key
    assert settings.SERVER_ONLY <= set(settings._KEYS)
    assert not settings.SERVER_ONLY & {key for key in settings._KEYS if snake(key) in option_fields()}


def test_every_server_setting_of_an_options_field_is_the_cli_flag_of_that_field():
    flags = cli_flags()
    for key in set(settings._KEYS) - settings.SERVER_ONLY:
        negative = "--no-" + flag(key)[2:]  # --no-recall sets `recall`
        action = flags.get(flag(key)) or flags.get(negative)
        assert action is not None and action.dest == snake(key), f"{key}: no flag {flag(key)}"


def test_server_only_settings_with_a_cli_flag_have_its_name():
    flags = cli_flags()
    for key in settings.SERVER_ONLY - set(CLI_NAMED_OTHERWISE):
        assert flag(key) in flags and flags[flag(key)].dest == snake(key), key


def test_every_cli_flag_sets_the_value_of_its_name():
    hidden = set(cli.RENAMED_FLAGS)
    for option, action in cli_flags().items():
        if option in hidden or option == "--help" or option.startswith("--no-"):
            continue
        assert action.dest == option[2:].replace("-", "_"), option


def test_the_repair_settings_have_one_name_in_the_engine():
    fields = {"retries": 1, "token_edits": 2, "fresh_fills": 3, "pass_budget": 5}
    policy = RepairPolicy.of(InfillOptions(**fields))
    assert {name: getattr(policy, name) for name in fields} == fields
    fix = FixOptions.from_infill(InfillOptions(**fields))
    assert (fix.retries, fix.token_edits) == (1, 2)
    assert set(REPAIR_FLAGS) == set(fields)  # infill-bench's flags


def test_the_old_names_are_one_rename_in_every_layer():
    assert settings.RENAMED == {"syntaxRounds": "retries", "syntaxEdits": "tokenEdits",
                                "syntaxRestarts": "freshFills"}  # fmt: skip
    assert cli.RENAMED_FLAGS == {flag(old): flag(new) for old, new in settings.RENAMED.items()}
    renamed_ts = LOGIC.split("export const RENAMED_SETTINGS")[1].split("};")[0]
    assert dict(re.findall(r"(\w+): '(\w+)'", renamed_ts)) == settings.RENAMED
    usage = cli.build_parser().format_help()
    for old, new in settings.RENAMED.items():
        assert new in settings._KEYS and old not in settings._KEYS
        assert flag(old) not in usage
        deprecated = PROPERTIES[f"infill.{old}"]["markdownDeprecationMessage"]
        assert f"#infill.{new}#" in deprecated, old


def test_every_vscode_setting_is_a_server_setting_or_the_extensions_own():
    keys = {key.removeprefix("infill.") for key in PROPERTIES}
    assert keys - CLIENT_ONLY - set(settings.RENAMED) == set(settings._KEYS)
    client = LOGIC.split("export const CLIENT_SETTINGS")[1].split(";")[0]
    assert set(re.findall(r"'(\w+)'", client)) == CLIENT_ONLY


def test_every_vscode_setting_with_a_list_of_values_offers_what_its_cli_flag_takes():
    """(null is the server's default, so a flag's "auto" may be left out of the list)"""
    flags = cli_flags()
    for name, setting in PROPERTIES.items():
        key = name.removeprefix("infill.")
        if "enum" not in setting or flag(key) not in flags:
            continue
        offered, taken = set(setting["enum"]) - {None}, set(flags[flag(key)].choices)
        assert offered <= taken and taken - offered <= {"auto"}, (name, sorted(taken - offered))


def test_the_editor_docs_list_the_server_settings_by_their_names():
    editors = (ROOT / "docs" / "editors.md").read_text()
    listed = editors.split("Settings (initializationOptions or the `infill` configuration section):")[1]
    assert set(re.findall(r"`(\w+)`", listed.split(". ")[0])) == set(settings._KEYS)
    nvim = (ROOT / "editors" / "nvim" / "README.md").read_text()
    listed = nvim.split("Keys of `init_options` and of the `infill` settings section:")[1].split("(see")[0]
    assert set(re.findall(r"`(\w+)`", listed)) <= set(settings._KEYS)
    vscode = (ROOT / "docs" / "vscode.md").read_text().split("## Settings")[1].split("\n## ")[0]
    rows = [line for line in vscode.splitlines() if line.startswith("| `infill.")]
    documented = {name for row in rows for name in re.findall(r"`infill\.(\w+)`", row.split(" | ")[0])}
    current = {key.removeprefix("infill.") for key in PROPERTIES} - set(settings.RENAMED)
    assert documented == current, sorted(documented ^ current)
