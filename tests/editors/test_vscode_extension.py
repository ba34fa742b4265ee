"""The VS Code extension's manifest against the server: every setting the server reads can be set
in VS Code (editors/vscode/package.json), under the same name. The extension's own logic has
node unit tests (editors/vscode/test, `npm test`); tests/editors/test_vscode_e2e.py runs it in VS Code."""

from __future__ import annotations

import json
import pathlib

from lsp_server import actions, settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
LOGIC = (ROOT / "editors" / "vscode" / "src" / "logic.ts").read_text()
CLIENT_ONLY = {"serverPath", "serverArgs", "inlineCompletion"}


def extension_settings() -> set[str]:
    properties = MANIFEST["contributes"]["configuration"]["properties"]
    assert all(key.startswith(f"{settings.SECTION}.") for key in properties), properties
    return {key.split(".", 1)[1] for key in properties}


def test_every_server_setting_is_an_extension_setting() -> None:
    missing = set(settings._KEYS) - extension_settings()
    assert not missing, f"settings the server reads but VS Code cannot set: {sorted(missing)}"


def test_the_extension_passes_every_server_setting_it_declares() -> None:
    # logic.ts SERVER_SETTINGS: what goes to the server; the rest of the manifest is client-only,
    # or an old name of a server setting (RENAMED: read where the new name is unset).
    declared = extension_settings() - CLIENT_ONLY - set(settings.RENAMED)
    for key in declared | set(settings._KEYS):
        assert f"'{key}'," in LOGIC.split("CLIENT_SETTINGS")[0], f"{key} is not in SERVER_SETTINGS (logic.ts)"


def test_the_extension_knows_the_server_action_kinds() -> None:
    # logic.ts spells the kinds as `${BASE_KIND}.selection` etc.; compare their expansions.
    base = actions.BASE_KIND
    assert f"export const BASE_KIND = '{base}';" in LOGIC
    for name, kind in [
        ("SELECTION_KIND", actions.SELECTION_KIND),
        ("NODE_KIND", actions.NODE_KIND),
        ("FIX_KIND", actions.FIX_KIND),
        ("ALTERNATIVES_KIND", actions.ALTERNATIVES_KIND),
        ("DOCSTRING_KIND", actions.DOCSTRING_KIND),
    ]:
        suffix = kind.removeprefix(base)
        assert f"export const {name} = `${{BASE_KIND}}{suffix}`;" in LOGIC, name
    assert f"export const FILE_DOCSTRINGS_KIND = '{actions.FILE_DOCSTRINGS_KIND}';" in LOGIC
    assert f"export const QUICK_FIX_KIND = '{actions.QUICK_FIX_KIND}';" in LOGIC


def test_every_command_has_a_title_and_the_keybindings_name_declared_commands() -> None:
    commands = {entry["command"]: entry for entry in MANIFEST["contributes"]["commands"]}
    for name in ["fillSelection", "fillNode", "fix", "addDocstring", "addDocstringsInFile", "alternatives"]:
        assert f"infill.{name}" in commands, name
        assert commands[f"infill.{name}"]["title"], name
    for binding in MANIFEST["contributes"]["keybindings"]:
        assert binding["command"] in commands, binding
    keys = [(b["key"], b.get("when", "")) for b in MANIFEST["contributes"]["keybindings"]]
    assert len(keys) == len(set(keys)), "two commands on the same key in the same context"


def test_the_extension_activates_and_selects_every_language_of_the_table() -> None:
    import re

    from infill.text.languages import LANGUAGES, named

    table = LOGIC.split("export const LANGUAGE_IDS")[1].split("};")[0]
    rows = re.findall(r"(\w+): \[(.*?)\]", table)
    ids = {name: re.findall(r"'([\w+-]+)'", listed) for name, listed in rows}
    assert set(ids) == {language.name for language in LANGUAGES}
    for name, language_ids in ids.items():
        assert language_ids and all(named(language_id).name == name for language_id in language_ids), name
    every_id = {language_id for listed in ids.values() for language_id in listed}
    events = {event.removeprefix("onLanguage:") for event in MANIFEST["activationEvents"]}
    assert events == every_id
    setting = MANIFEST["contributes"]["configuration"]["properties"]["infill.languages"]
    assert setting["items"]["enum"] == [language.name for language in LANGUAGES]


EXTENSION = (ROOT / "editors" / "vscode" / "src" / "extension.ts").read_text()
WHEN_ENABLED = "editorLangId in infill.languageIds"


def test_menus_and_keys_follow_the_languages_setting() -> None:
    """Every menu entry and key of an action command is narrowed by the context key that the
    extension sets from `infill.languages` (on activation and when the setting changes), not by a
    fixed list of languages."""
    assert "export const LANGUAGES_CONTEXT = 'infill.languageIds';" in LOGIC
    assert "export const WHEN_ENABLED = `editorLangId in ${LANGUAGES_CONTEXT}`;" in LOGIC
    assert "executeCommand('setContext', LANGUAGES_CONTEXT, enabled)" in EXTENSION
    setter = EXTENSION.split("async function setLanguageContext")[1].split("\n}\n")[0]
    assert "enabledLanguageIds(vscode.workspace.getConfiguration(SECTION).get('languages'))" in setter
    changed = EXTENSION.split("onDidChangeConfiguration")[1].split("restartOn")[0]
    assert "affectsConfiguration('infill.languages')" in changed and "setLanguageContext()" in changed
    contributes = MANIFEST["contributes"]
    entries = contributes["keybindings"] + [entry for menu in contributes["menus"].values() for entry in menu]
    action_commands = {"infill.fillSelection", "infill.fillNode", "infill.fix", "infill.addDocstring",
                       "infill.addDocstringsInFile", "infill.alternatives"}  # fmt: skip
    assert {entry["command"] for entry in entries} == action_commands
    for entry in entries:
        assert WHEN_ENABLED in entry["when"] and "editorLangId =~" not in entry["when"], entry


def test_command_titles_name_docstrings_and_doc_comments() -> None:
    commands = {entry["command"]: entry["title"] for entry in MANIFEST["contributes"]["commands"]}
    assert commands["infill.addDocstring"] == "Add docstring or doc comment"
    assert commands["infill.addDocstringsInFile"] == "Add missing docstrings or doc comments in file"
