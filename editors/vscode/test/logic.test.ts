// Unit tests of the extension's own decisions (src/logic.ts), run with `node --test` on the
// compiled JavaScript: `npm test`.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
    ALTERNATIVES_KIND,
    CLIENT_SETTINGS,
    DOCSTRING_KIND,
    FILE_DOCSTRINGS_KIND,
    FIX_KIND,
    INSTALL_COMMAND,
    LANGUAGE_IDS,
    NODE_KIND,
    QUICK_FIX_KIND,
    RENAMED_SETTINGS,
    SELECTION_KIND,
    LANGUAGES_CONTEXT,
    SERVER_SETTINGS,
    WHEN_ENABLED,
    alternativeCandidates,
    chooseAction,
    describeRange,
    docNoun,
    documentSelector,
    effectiveCommand,
    enabledLanguageIds,
    findServer,
    isLinewise,
    kindsFor,
    missingServerMessage,
    nothingToDo,
    renamedSettingMessage,
    renamedSettingsInUse,
    requestErrorMessage,
    selectionToRange,
    serverSettings,
} from '../src/logic';

const pos = (line: number, character: number) => ({ line, character });

describe('languages', () => {
    it('works in every language of the table by default, and in those the setting names', () => {
        const all = enabledLanguageIds(null);
        assert.deepEqual(all, ['python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
            'go', 'rust', 'java', 'c', 'cpp']);
        assert.deepEqual(enabledLanguageIds([]), all);
        assert.deepEqual(enabledLanguageIds(['go', 'tsx', 'cobol', 7]), ['go', 'typescriptreact']);
    });

    it('selects files and untitled editors of the enabled languages', () => {
        assert.deepEqual(documentSelector(['typescript']), [
            { scheme: 'file', language: 'typescript' },
            { scheme: 'untitled', language: 'typescript' },
        ]);
        assert.equal(documentSelector(undefined).length, 2 * Object.values(LANGUAGE_IDS).flat().length);
    });
});

describe('menus and keys follow the languages setting', () => {
    // package.json, as VS Code reads it: every menu entry and key of a command that runs a code
    // action shows only where the context key the extension sets holds the editor's language.
    const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));
    const always = new Set(['infill.restartServer', 'infill.showOutput']);
    const entries: { command: string; when?: string }[] = [
        ...manifest.contributes.keybindings,
        ...Object.values(manifest.contributes.menus as Record<string, { command: string; when?: string }[]>).flat(),
    ];

    it('every menu entry and key of an action command is narrowed by the context key', () => {
        assert.equal(WHEN_ENABLED, 'editorLangId in infill.languageIds');
        assert.equal(LANGUAGES_CONTEXT, 'infill.languageIds');
        const narrowed = entries.filter((entry) => !always.has(entry.command));
        assert.ok(narrowed.length >= 10, `${narrowed.length} entries`);
        for (const entry of narrowed) {
            assert.ok(entry.when?.includes(WHEN_ENABLED), `${entry.command}: ${entry.when}`);
            assert.ok(!entry.when?.includes('editorLangId =~'), `${entry.command}: a fixed list of languages`);
        }
    });

    it('the context key holds the languageIds of the setting (all of them when it is empty)', () => {
        // what the extension passes to setContext (src/extension.ts: setLanguageContext)
        assert.deepEqual(enabledLanguageIds(['python', 'go']), ['python', 'go']);
        assert.ok(!enabledLanguageIds(['python', 'go']).includes('typescript'));
        assert.equal(enabledLanguageIds(null).length, Object.values(LANGUAGE_IDS).flat().length);
    });
});

describe('documentation wording', () => {
    it('says docstring in Python and doc comment in the other languages', () => {
        assert.equal(docNoun('python'), 'docstring');
        assert.equal(docNoun('typescript'), 'doc comment');
        assert.equal(docNoun('rust'), 'doc comment');
        assert.match(nothingToDo('addDocstring', 'python'), /without a docstring\.$/);
        assert.match(nothingToDo('addDocstring', 'go'), /without a doc comment\.$/);
        assert.match(nothingToDo('addDocstringsInFile', 'java'), /has a doc comment\.$/);
        assert.doesNotMatch(nothingToDo('fillSelection', 'go'), /Python/);
    });
});

describe('serverSettings', () => {
    it('passes the set server keys and drops unset ones and client-only ones', () => {
        const config = {
            serverPath: '/venv/bin/infill-lsp',
            serverArgs: ['--log-level', 'INFO'],
            inlineCompletion: false,
            modelPath: '/models/m',
            device: 'cpu',
            dtype: null,
            steps: 32,
            temperature: 0,
            alternatives: undefined,
            passBudget: 0,
            threads: null,
        };
        assert.deepEqual(serverSettings(config), {
            modelPath: '/models/m',
            device: 'cpu',
            steps: 32,
            temperature: 0,
            passBudget: 0,
        });
    });

    it('passes the review settings, false included', () => {
        assert.deepEqual(serverSettings({ review: false, reviewThreshold: 0.01, reviewMaxPerFile: null }), {
            review: false,
            reviewThreshold: 0.01,
        });
    });

    it('treats an empty or blank string as unset and trims paths', () => {
        assert.deepEqual(serverSettings({ modelPath: '', device: '  ', dtype: ' bfloat16 ' }), { dtype: 'bfloat16' });
    });

    it('keeps values it cannot check for the server to judge (it warns about them)', () => {
        assert.deepEqual(serverSettings({ steps: -3, alternatives: 'many' }), { steps: -3, alternatives: 'many' });
    });

    it('accepts nothing usable: null, arrays of the wrong shape, non-objects', () => {
        assert.deepEqual(serverSettings(null), {});
        assert.deepEqual(serverSettings(undefined), {});
        assert.deepEqual(serverSettings('modelPath'), {});
        assert.deepEqual(serverSettings([]), {});
    });

    it('knows every key of lsp_server/settings.py, none of them client-only', () => {
        const expected = [
            'modelPath', 'steps', 'temperature', 'blockLength', 'blockPasses', 'alternatives',
            'contextLength', 'retries', 'tokenEdits', 'freshFills', 'passBudget', 'recall', 'threads', 'device', 'dtype',
            'trustRemoteCode', 'quantize', 'requestTimeout', 'idleRefresh', 'languages', 'protocol',
            'review', 'reviewThreshold', 'reviewMaxPerFile', 'endpoint', 'token',
        ];
        assert.deepEqual([...SERVER_SETTINGS].sort(), expected.sort());
        for (const key of CLIENT_SETTINGS) {
            assert.ok(!(SERVER_SETTINGS as readonly string[]).includes(key), key);
        }
    });

    it('reads an old setting name under its new one while the new one is unset', () => {
        assert.deepEqual(serverSettings({ syntaxRounds: 0, syntaxEdits: 2, syntaxRestarts: null }), {
            retries: 0,
            tokenEdits: 2,
        });
        assert.deepEqual(serverSettings({ syntaxRounds: 1, retries: 3, freshFills: null, syntaxRestarts: 0 }), {
            retries: 3,
            freshFills: 0,
        });
    });

    it('names the old settings in use, for a warning that gives the new name', () => {
        assert.deepEqual(renamedSettingsInUse({ syntaxRounds: 0, syntaxEdits: null, retries: 2, steps: 4 }), [
            'syntaxRounds',
        ]);
        assert.deepEqual(renamedSettingsInUse({ retries: 2 }), []);
        assert.deepEqual(renamedSettingsInUse(null), []);
        assert.match(renamedSettingMessage('syntaxEdits'), /"infill\.syntaxEdits" is deprecated: use "infill\.tokenEdits"/);
        for (const [old, name] of Object.entries(RENAMED_SETTINGS)) {
            assert.ok((SERVER_SETTINGS as readonly string[]).includes(name), name);
            assert.ok(!(SERVER_SETTINGS as readonly string[]).includes(old), old);
        }
    });
});

// Actions as lsp_server/actions.py lists them for a selection inside a function with a syntax
// error on the line (unresolved: data only), plus the already sampled alternatives.
function data(mode: string, start: number, end: number, candidate?: number) {
    const d: Record<string, unknown> = { uri: 'file:///a.py', version: 3, kind: 'selection', start, end, mode };
    if (candidate !== undefined) {
        d.candidate = candidate;
    }
    return d;
}
const listed = [
    { title: 'Infill: fix syntax error (fill statement on line 2)', kind: QUICK_FIX_KIND, isPreferred: true, data: data('fill', 4, 9) },
    { title: 'Infill: alternative 2 of 3 (score -0.9)', kind: ALTERNATIVES_KIND, data: data('alternative', 4, 9, 1), edit: {} },
    { title: 'Infill: alternative 1 of 3 (score -0.5)', kind: ALTERNATIVES_KIND, data: data('alternative', 4, 9, 0), edit: {} },
    { title: 'Infill: fill selection', kind: SELECTION_KIND, data: data('fill', 4, 9) },
    { title: 'Infill: fill body on lines 2-3', kind: NODE_KIND, data: data('node', 2, 20) },
    { title: 'Infill: fix selection', kind: FIX_KIND, data: data('fix', 4, 9) },
    { title: 'Infill: fill selection (3 alternatives)', kind: ALTERNATIVES_KIND, data: data('alternative', 4, 9) },
    { title: 'Infill: add docstring to f', kind: DOCSTRING_KIND, data: data('document', 2, 2) },
    { title: 'Infill: add missing docstrings in file (2)', kind: FILE_DOCSTRINGS_KIND, data: data('document', 0, 40) },
];

describe('chooseAction', () => {
    it('picks the action of each command by kind and mode', () => {
        assert.equal(chooseAction('fillSelection', listed)?.title, 'Infill: fill selection');
        assert.equal(chooseAction('fillNode', listed)?.title, 'Infill: fill body on lines 2-3');
        assert.equal(chooseAction('addDocstring', listed)?.title, 'Infill: add docstring to f');
        assert.equal(chooseAction('addDocstringsInFile', listed)?.title, 'Infill: add missing docstrings in file (2)');
    });

    it('alternatives: the action that samples them, not an already sampled candidate', () => {
        assert.equal(chooseAction('alternatives', listed)?.title, 'Infill: fill selection (3 alternatives)');
        const sampledOnly = listed.filter((a) => a.kind === ALTERNATIVES_KIND && a.data.candidate !== undefined);
        assert.equal(chooseAction('alternatives', sampledOnly), undefined);
    });

    it('fix: the preferred quick fix of a syntax error first, else the fix action', () => {
        assert.equal(chooseAction('fix', listed)?.title, 'Infill: fix syntax error (fill statement on line 2)');
        const noErrors = listed.filter((a) => a.kind !== QUICK_FIX_KIND);
        assert.equal(chooseAction('fix', noErrors)?.title, 'Infill: fix selection');
    });

    it('fill selection does not take a quick fix whose mode is fill', () => {
        const quickFixOnly = listed.filter((a) => a.kind === QUICK_FIX_KIND);
        assert.equal(chooseAction('fillSelection', quickFixOnly), undefined);
    });

    it('nothing fits: undefined', () => {
        for (const command of ['fillSelection', 'fillNode', 'fix', 'addDocstring', 'addDocstringsInFile', 'alternatives'] as const) {
            assert.equal(chooseAction(command, []), undefined);
        }
    });

    it('asks the server only for the kinds it can choose from', () => {
        for (const command of ['fillSelection', 'fillNode', 'fix', 'addDocstring', 'addDocstringsInFile', 'alternatives'] as const) {
            const chosen = chooseAction(command, listed);
            assert.ok(chosen, command);
            assert.ok(kindsFor(command).includes(chosen.kind), `${command}: ${chosen.kind}`);
            const filtered = listed.filter((a) => kindsFor(command).includes(a.kind));
            assert.equal(chooseAction(command, filtered), chosen, command);
        }
    });

    it('an empty selection fills the node at the cursor', () => {
        assert.equal(effectiveCommand('fillSelection', true), 'fillNode');
        assert.equal(effectiveCommand('alternatives', true), 'fillNode');
        assert.equal(effectiveCommand('fillSelection', false), 'fillSelection');
        assert.equal(effectiveCommand('fix', true), 'fix');
        assert.equal(effectiveCommand('addDocstring', true), 'addDocstring');
    });

    it('lists the sampled alternatives best first, only resolved ones', () => {
        const unresolved = { title: 'x', kind: ALTERNATIVES_KIND, data: data('alternative', 4, 9, 2) };
        const found = alternativeCandidates([...listed, unresolved]);
        assert.deepEqual(found.map((a) => a.title), ['Infill: alternative 1 of 3 (score -0.5)', 'Infill: alternative 2 of 3 (score -0.9)']);
    });
});

describe('selectionToRange', () => {
    // Lines of a file as VS Code has them (0-based), for lineLength.
    const text = ['def f(x):', '    y = x + 1', '', '    return y', ''];
    const lineLength = (line: number) => text[line].length;

    it('a linewise selection (lines 28-29, ending at column 0 of line 30) keeps its final line break out', () => {
        // VS Code lines are 0-based: lines 28-29 are 27 and 28; the selection ends at (29, 0).
        const range = selectionToRange({ start: pos(27, 0), end: pos(29, 0) }, () => 17);
        assert.deepEqual(range, { start: pos(27, 0), end: pos(28, 17) });
        assert.equal(describeRange(range), 'lines 28-29');
        const lines12 = selectionToRange({ start: pos(1, 0), end: pos(4, 0) }, lineLength);
        assert.deepEqual(lines12, { start: pos(1, 0), end: pos(3, 12) });
    });

    it('a linewise selection made upwards is trimmed the same way', () => {
        assert.deepEqual(selectionToRange({ start: pos(2, 0), end: pos(0, 0) }, lineLength), {
            start: pos(0, 0),
            end: pos(1, 13),
        });
    });

    it('a linewise selection ending in a blank line ends at that line; one blank line keeps its break', () => {
        assert.deepEqual(selectionToRange({ start: pos(1, 0), end: pos(3, 0) }, lineLength), {
            start: pos(1, 0),
            end: pos(2, 0),
        });
        assert.deepEqual(selectionToRange({ start: pos(2, 0), end: pos(3, 0) }, lineLength), {
            start: pos(2, 0),
            end: pos(3, 0),
        });
    });

    it('without line lengths a linewise selection passes through', () => {
        const range = selectionToRange({ start: pos(27, 0), end: pos(29, 0) });
        assert.deepEqual(range, { start: pos(27, 0), end: pos(29, 0) });
        assert.ok(isLinewise(range));
        assert.equal(describeRange(range), 'lines 28-29');
    });

    it('a selection made upwards (active before anchor) is normalised', () => {
        assert.deepEqual(selectionToRange({ start: pos(5, 3), end: pos(2, 7) }), { start: pos(2, 7), end: pos(5, 3) });
        assert.deepEqual(selectionToRange({ start: pos(4, 9), end: pos(4, 2) }), { start: pos(4, 2), end: pos(4, 9) });
        // Mid-line to column 0 of a later line is not linewise: not trimmed.
        assert.deepEqual(selectionToRange({ start: pos(3, 0), end: pos(1, 4) }, () => 80), { start: pos(1, 4), end: pos(3, 0) });
    });

    it('a charwise selection and the cursor pass through', () => {
        const charwise = selectionToRange({ start: pos(3, 4), end: pos(3, 11) }, () => 80);
        assert.deepEqual(charwise, { start: pos(3, 4), end: pos(3, 11) });
        assert.ok(!isLinewise(charwise));
        assert.equal(describeRange(charwise), 'line 4, columns 5-11');
        const cursor = selectionToRange({ start: pos(6, 2), end: pos(6, 2) }, () => 80);
        assert.deepEqual(cursor, { start: pos(6, 2), end: pos(6, 2) });
        assert.equal(describeRange(cursor), 'line 7');
    });

    it('one whole line is linewise; a range ending mid-line or starting mid-line is not', () => {
        assert.ok(isLinewise({ start: pos(0, 0), end: pos(1, 0) }));
        assert.equal(describeRange({ start: pos(0, 0), end: pos(1, 0) }), 'line 1');
        assert.ok(!isLinewise({ start: pos(0, 0), end: pos(1, 2) }));
        assert.ok(!isLinewise({ start: pos(0, 4), end: pos(2, 0) }));
        assert.ok(!isLinewise({ start: pos(3, 0), end: pos(3, 0) }));
    });

    it('copies positions (no aliasing of the editor selection)', () => {
        const selection = { start: pos(1, 1), end: pos(2, 2) };
        const range = selectionToRange(selection);
        range.start.line = 99;
        assert.equal(selection.start.line, 1);
    });
});

describe('findServer', () => {
    const exists = (paths: string[]) => (path: string) => paths.includes(path);

    it('finds a bare name in the workspace venv before PATH', () => {
        const found = findServer('infill-lsp', {
            pathEnv: '/usr/bin:/opt/x/bin',
            workspaceFolders: ['/w'],
            platform: 'linux',
            isExecutable: exists(['/opt/x/bin/infill-lsp', '/w/.venv/bin/infill-lsp']),
        });
        assert.equal(found, '/w/.venv/bin/infill-lsp');
    });

    it('finds a bare name on PATH, in order; an empty setting means infill-lsp', () => {
        const options = {
            pathEnv: '/usr/bin::/opt/x/bin:/opt/y/bin',
            workspaceFolders: [],
            platform: 'linux',
            isExecutable: exists(['/opt/y/bin/infill-lsp', '/opt/x/bin/infill-lsp']),
        };
        assert.equal(findServer('infill-lsp', options), '/opt/x/bin/infill-lsp');
        assert.equal(findServer('', options), '/opt/x/bin/infill-lsp');
        assert.equal(findServer(undefined, options), '/opt/x/bin/infill-lsp');
    });

    it('takes an absolute path as it is and a relative one against the workspace folders', () => {
        const options = {
            pathEnv: '/bin',
            workspaceFolders: ['/a', '/b/'],
            platform: 'linux',
            isExecutable: exists(['/srv/infill-lsp', '/b/env/bin/infill-lsp', '/bin/env/bin/infill-lsp']),
        };
        assert.equal(findServer('/srv/infill-lsp', options), '/srv/infill-lsp');
        assert.equal(findServer('env/bin/infill-lsp', options), '/b/env/bin/infill-lsp');
        assert.equal(findServer('/nowhere/infill-lsp', options), undefined);
    });

    it('missing everywhere: undefined, and the message gives the install command', () => {
        const found = findServer('infill-lsp', {
            pathEnv: '/usr/bin',
            workspaceFolders: ['/w'],
            platform: 'linux',
            isExecutable: () => false,
        });
        assert.equal(found, undefined);
        const message = missingServerMessage('infill-lsp', 'not found');
        assert.ok(message.includes(INSTALL_COMMAND), message);
        assert.ok(message.includes('infill.serverPath'), message);
        assert.ok(message.includes('torch==2.13.0'), message);
    });

    it('Windows: .exe in the venv Scripts folder and PATH split on semicolons', () => {
        const found = findServer('infill-lsp', {
            pathEnv: 'C:\\Python\\Scripts;C:\\x',
            workspaceFolders: ['C:\\w'],
            platform: 'win32',
            isExecutable: exists(['C:\\x\\infill-lsp.exe']),
        });
        assert.equal(found, 'C:\\x\\infill-lsp.exe');
        const inVenv = findServer('infill-lsp', {
            pathEnv: '',
            workspaceFolders: ['C:\\w'],
            platform: 'win32',
            isExecutable: exists(['C:\\w\\.venv\\Scripts\\infill-lsp.exe']),
        });
        assert.equal(inVenv, 'C:\\w\\.venv\\Scripts\\infill-lsp.exe');
    });
});

describe('requestErrorMessage', () => {
    it('is silent for a cancelled request, says to run again for a modified file', () => {
        assert.equal(requestErrorMessage('Infill: fill selection', -32800, 'cancelled'), undefined);
        assert.match(requestErrorMessage('Infill: fill selection', -32801, 'x') ?? '', /changed while the model ran/);
        assert.equal(requestErrorMessage('T', -32803, 'cannot load the model'), 'T: cannot load the model');
    });
});
