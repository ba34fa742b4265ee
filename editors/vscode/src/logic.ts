// The extension's own decisions as plain functions (no `vscode` import), unit-tested with
// `node --test` (test/logic.test.ts): which settings go to the server, which of the server's
// code actions a command runs, and what range a selection asks about.
//
// The action kinds and data mirror lsp_server/actions.py; the setting names mirror
// lsp_server/settings.py.

export const INSTALL_COMMAND = 'pip install torch==2.13.0 && pip install -e ".[lsp]"';

/** Settings the server reads (initializationOptions and the `infill` configuration section). */
export const SERVER_SETTINGS = [
    'modelPath',
    'device',
    'dtype',
    'steps',
    'temperature',
    'blockLength',
    'blockPasses',
    'alternatives',
    'contextLength',
    'retries',
    'tokenEdits',
    'freshFills',
    'passBudget',
    'recall',
    'threads',
    'trustRemoteCode',
    'quantize',
    'requestTimeout',
    'idleRefresh',
    'languages',
    'protocol',
    'review',
    'reviewThreshold',
    'reviewMaxPerFile',
    'endpoint',
    'token',
] as const;

/** Settings only the extension reads. */
export const CLIENT_SETTINGS = ['serverPath', 'serverArgs', 'inlineCompletion'] as const;

/**
 * Old names of server settings, and their names now (lsp_server/settings.py RENAMED): one name
 * per setting in every layer, from the engine's options to the CLI flags to these settings.
 * package.json still declares the old ones, marked deprecated, and they are still read.
 */
export const RENAMED_SETTINGS: Readonly<Record<string, (typeof SERVER_SETTINGS)[number]>> = {
    syntaxRounds: 'retries',
    syntaxEdits: 'tokenEdits',
    syntaxRestarts: 'freshFills',
};

function isSet(value: unknown): boolean {
    return !(value === null || value === undefined || (typeof value === 'string' && value.trim() === ''));
}

/** The value set for a server key: under its name, else under its old name (undefined: unset). */
function valueOf(values: Record<string, unknown>, key: string): unknown {
    if (isSet(values[key])) {
        return values[key];
    }
    const old = Object.keys(RENAMED_SETTINGS).find((name) => RENAMED_SETTINGS[name] === key);
    return old !== undefined && isSet(values[old]) ? values[old] : undefined;
}

/**
 * What the server gets from the `infill` settings: the server's keys whose value is set (not
 * null, undefined or an empty string; those leave the server's default in place), each under its
 * current name (a value set under an old name only goes to the server under the new one).
 */
export function serverSettings(config: unknown): Record<string, unknown> {
    const result: Record<string, unknown> = {};
    if (config === null || typeof config !== 'object') {
        return result;
    }
    const values = config as Record<string, unknown>;
    for (const key of SERVER_SETTINGS) {
        const value = valueOf(values, key);
        if (value !== undefined) {
            result[key] = typeof value === 'string' ? value.trim() : value;
        }
    }
    return result;
}

/** The old setting names set in the `infill` settings: the extension warns once about each. */
export function renamedSettingsInUse(config: unknown): string[] {
    if (config === null || typeof config !== 'object') {
        return [];
    }
    const values = config as Record<string, unknown>;
    return Object.keys(RENAMED_SETTINGS).filter((old) => isSet(values[old]));
}

/** The warning about an old setting name. */
export function renamedSettingMessage(old: string): string {
    const name = RENAMED_SETTINGS[old] ?? old;
    return (
        `infill: the setting "infill.${old}" is deprecated: use "infill.${name}" ` +
        `(the old name is read only while the new one is unset).`
    );
}

// ---------------------------------------------------------------------- languages

/**
 * VS Code's languageIds of the languages infill knows, by infill's name for each (the table in
 * infill/text/languages.py; package.json's activationEvents and `when` clauses list the same ids).
 */
export const LANGUAGE_IDS: Record<string, readonly string[]> = {
    python: ['python'],
    javascript: ['javascript', 'javascriptreact'],
    typescript: ['typescript'],
    tsx: ['typescriptreact'],
    go: ['go'],
    rust: ['rust'],
    java: ['java'],
    c: ['c'],
    cpp: ['cpp'],
};

/** The languageIds infill works in: those of the `languages` setting's names, else all. */
export function enabledLanguageIds(languages: unknown): string[] {
    const names = Array.isArray(languages) && languages.length > 0 ? languages : Object.keys(LANGUAGE_IDS);
    return names.flatMap((name) => (typeof name === 'string' ? (LANGUAGE_IDS[name] ?? []) : []));
}

/**
 * The context key the extension sets to the enabled languageIds (and again when the setting
 * changes): package.json's menus and keybindings show only `when` it holds the editor's language.
 */
export const LANGUAGES_CONTEXT = 'infill.languageIds';
export const WHEN_ENABLED = `editorLangId in ${LANGUAGES_CONTEXT}`;

/** The client's document selector: files and untitled editors of the enabled languages. */
export function documentSelector(languages: unknown): { scheme: string; language: string }[] {
    return enabledLanguageIds(languages).flatMap((language) => [
        { scheme: 'file', language },
        { scheme: 'untitled', language },
    ]);
}

// ---------------------------------------------------------------------- code actions

export const BASE_KIND = 'refactor.rewrite.infill';
export const SELECTION_KIND = `${BASE_KIND}.selection`;
export const NODE_KIND = `${BASE_KIND}.node`;
export const FIX_KIND = `${BASE_KIND}.fix`;
export const ALTERNATIVES_KIND = `${BASE_KIND}.alternatives`;
export const DOCSTRING_KIND = `${BASE_KIND}.docstring`;
export const FILE_DOCSTRINGS_KIND = 'source.infill.docstrings';
export const QUICK_FIX_KIND = 'quickfix';

export type CommandName =
    | 'fillSelection'
    | 'fillNode'
    | 'fix'
    | 'addDocstring'
    | 'addDocstringsInFile'
    | 'alternatives';

/** The shape of an LSP code action as far as choosing one goes. */
export interface ActionLike {
    title: string;
    kind?: string;
    isPreferred?: boolean;
    data?: unknown;
    edit?: unknown;
}

/** The action kinds a command asks the server for (the request's `context.only`). */
export function kindsFor(command: CommandName): string[] {
    switch (command) {
        case 'fillSelection':
            return [SELECTION_KIND];
        case 'fillNode':
            return [NODE_KIND];
        case 'fix':
            return [QUICK_FIX_KIND, FIX_KIND];
        case 'addDocstring':
            return [DOCSTRING_KIND];
        case 'addDocstringsInFile':
            return [FILE_DOCSTRINGS_KIND];
        case 'alternatives':
            return [ALTERNATIVES_KIND];
    }
}

/**
 * The command to run for a selection: "fill selection" and "alternatives" on an empty
 * selection fill the node at the cursor instead (there is nothing selected to fill).
 */
export function effectiveCommand(command: CommandName, selectionIsEmpty: boolean): CommandName {
    if (selectionIsEmpty && (command === 'fillSelection' || command === 'alternatives')) {
        return 'fillNode';
    }
    return command;
}

function dataOf(action: ActionLike): Record<string, unknown> {
    return action.data !== null && typeof action.data === 'object' ? (action.data as Record<string, unknown>) : {};
}

/** The candidate index of an "alternative" action, undefined for the action that samples them. */
export function candidateOf(action: ActionLike): number | undefined {
    const candidate = dataOf(action).candidate;
    return typeof candidate === 'number' ? candidate : undefined;
}

/**
 * Of the actions the server listed, the one a command runs (undefined: none fits).
 *
 * - fillSelection: "fill selection"; fillNode: "fill <node>";
 * - fix: the preferred quick fix of a syntax error in the range (it repairs or regenerates, as
 *   the error needs), else "fix selection" / "fix statement on line N";
 * - addDocstring: "add docstring to <definition>" ("add doc comment to ..." outside Python);
 *   addDocstringsInFile: the whole file's;
 * - alternatives: "fill selection (N alternatives)" (the action that samples them).
 */
export function chooseAction<T extends ActionLike>(command: CommandName, actions: readonly T[]): T | undefined {
    const ofKind = (kind: string) => actions.filter((action) => action.kind === kind);
    switch (command) {
        case 'fillSelection':
            return ofKind(SELECTION_KIND).find((action) => dataOf(action).mode === 'fill');
        case 'fillNode':
            return ofKind(NODE_KIND)[0];
        case 'fix': {
            const quickFixes = ofKind(QUICK_FIX_KIND);
            return quickFixes.find((action) => action.isPreferred) ?? quickFixes[0] ?? ofKind(FIX_KIND)[0];
        }
        case 'addDocstring':
            return ofKind(DOCSTRING_KIND)[0];
        case 'addDocstringsInFile':
            return ofKind(FILE_DOCSTRINGS_KIND)[0];
        case 'alternatives':
            return ofKind(ALTERNATIVES_KIND).find((action) => candidateOf(action) === undefined);
    }
}

/** The sampled alternatives among the listed actions (resolved, with a candidate), best first. */
export function alternativeCandidates<T extends ActionLike>(actions: readonly T[]): T[] {
    return actions
        .filter((action) => action.kind === ALTERNATIVES_KIND && candidateOf(action) !== undefined && action.edit)
        .sort((a, b) => (candidateOf(a) ?? 0) - (candidateOf(b) ?? 0));
}

/**
 * What documentation is called in a language: "docstring" in Python, "doc comment" elsewhere
 * (JSDoc, Javadoc, Doxygen, rustdoc, Go); the server's action titles say the same
 * (infill/text/languages.py, Language.doc_noun).
 */
export function docNoun(languageId: string): string {
    return languageId === 'python' ? 'docstring' : 'doc comment';
}

/** What to tell the user when the server offers nothing for the command here. */
export function nothingToDo(command: CommandName, languageId = 'python'): string {
    switch (command) {
        case 'fillSelection':
        case 'alternatives':
            return 'infill: this selection cannot be filled (select whole tokens).';
        case 'fillNode':
            return 'infill: no statement, body or expression at the cursor to fill.';
        case 'fix':
            return 'infill: nothing to fix here (select code, or put the cursor in a statement).';
        case 'addDocstring':
            return `infill: the cursor is not in a function or class without a ${docNoun(languageId)}.`;
        case 'addDocstringsInFile':
            return `infill: every function and class in this file has a ${docNoun(languageId)}.`;
    }
}

// ---------------------------------------------------------------------- positions

export interface PositionLike {
    line: number;
    character: number;
}

export interface RangeLike {
    start: PositionLike;
    end: PositionLike;
}

function before(a: PositionLike, b: PositionLike): boolean {
    return a.line < b.line || (a.line === b.line && a.character < b.character);
}

/**
 * The LSP range a selection asks about: start before end whatever the selection's direction
 * (VS Code positions are UTF-16 code units, as LSP's default). An empty selection is the cursor.
 *
 * A linewise selection (from column 0 to column 0 of the line after the last selected one, as
 * shift+down or a click in the gutter make it) ends instead at the end of the last selected
 * line's text (``lineLength``): its final line break stays outside the span, so whatever the
 * model writes, the next line stays a line of its own (the file keeps its line structure). A
 * single blank line keeps its line break (the range would be empty).
 */
export function selectionToRange(selection: RangeLike, lineLength?: (line: number) => number): RangeLike {
    const [start, end] = before(selection.end, selection.start)
        ? [selection.end, selection.start]
        : [selection.start, selection.end];
    const range = {
        start: { line: start.line, character: start.character },
        end: { line: end.line, character: end.character },
    };
    if (lineLength !== undefined && isLinewise(range)) {
        const last = range.end.line - 1;
        const trimmed = { line: last, character: lineLength(last) };
        if (before(range.start, trimmed)) {
            range.end = trimmed;
        }
    }
    return range;
}

/** Whether a range covers whole lines: it starts at column 0 and ends at column 0 of a later line. */
export function isLinewise(range: RangeLike): boolean {
    return range.start.character === 0 && range.end.character === 0 && range.end.line > range.start.line;
}

/** "lines 3-4" / "line 3" / "line 3, columns 5-9": a range for messages (1-based lines). */
export function describeRange(range: RangeLike): string {
    const first = range.start.line + 1;
    const last = isLinewise(range) ? range.end.line : range.end.line + 1; // 0-based end line + 1
    if (first === last) {
        if (isLinewise(range) || range.start.character === range.end.character) {
            return `line ${first}`;
        }
        return `line ${first}, columns ${range.start.character + 1}-${range.end.character}`;
    }
    return `lines ${first}-${last}`;
}

// ---------------------------------------------------------------------- finding the server

export interface FindServerOptions {
    pathEnv: string | undefined; // the PATH variable
    workspaceFolders: readonly string[]; // file system paths
    platform: string; // process.platform
    isExecutable: (path: string) => boolean;
}

function joinPath(dir: string, name: string, windows: boolean): string {
    const separator = windows ? '\\' : '/';
    return dir.endsWith('/') || dir.endsWith('\\') ? dir + name : dir + separator + name;
}

function isAbsolute(path: string, windows: boolean): boolean {
    return path.startsWith('/') || (windows && (/^[A-Za-z]:[\\/]/.test(path) || path.startsWith('\\\\')));
}

/**
 * The server executable for the `infill.serverPath` setting, or undefined if there is none.
 *
 * A path (it contains a slash) is taken as it is, relative paths against each workspace folder.
 * A bare name is looked up in each workspace folder's virtual environment (`.venv/bin`, or
 * `.venv\Scripts` on Windows), then on PATH. An empty setting means "infill-lsp".
 */
export function findServer(serverPath: string | undefined, options: FindServerOptions): string | undefined {
    const windows = options.platform === 'win32';
    const name = (serverPath ?? '').trim() || 'infill-lsp';
    const names = windows && !/\.(exe|cmd|bat)$/i.test(name) ? [`${name}.exe`, `${name}.cmd`, name] : [name];
    const candidates: string[] = [];
    if (name.includes('/') || (windows && name.includes('\\'))) {
        if (isAbsolute(name, windows)) {
            candidates.push(...names);
        } else {
            for (const folder of options.workspaceFolders) {
                candidates.push(...names.map((n) => joinPath(folder, n, windows)));
            }
        }
    } else {
        const venvBin = windows ? '.venv\\Scripts' : '.venv/bin';
        for (const folder of options.workspaceFolders) {
            candidates.push(...names.map((n) => joinPath(joinPath(folder, venvBin, windows), n, windows)));
        }
        for (const dir of (options.pathEnv ?? '').split(windows ? ';' : ':')) {
            if (dir) {
                candidates.push(...names.map((n) => joinPath(dir, n, windows)));
            }
        }
    }
    return candidates.find((candidate) => options.isExecutable(candidate));
}

/** The message shown when the server cannot be found or started. */
export function missingServerMessage(serverPath: string | undefined, reason?: string): string {
    const name = (serverPath ?? '').trim() || 'infill-lsp';
    const why = reason ? ` (${reason})` : '';
    return (
        `infill: cannot start the language server "${name}"${why}. Install it in a checkout of infill ` +
        `with \`${INSTALL_COMMAND}\`, then set "infill.serverPath" to the venv's infill-lsp ` +
        `(or put it on PATH).`
    );
}

// ---------------------------------------------------------------------- errors

export const REQUEST_CANCELLED = -32800;
export const CONTENT_MODIFIED = -32801;

/** What to show for a failed request (undefined: nothing, e.g. the user cancelled it). */
export function requestErrorMessage(title: string, code: number | undefined, message: string): string | undefined {
    if (code === REQUEST_CANCELLED) {
        return undefined;
    }
    if (code === CONTENT_MODIFIED) {
        return `${title}: the file changed while the model ran; run it again.`;
    }
    return `${title}: ${message}`;
}
