// The infill extension: starts `infill-lsp` for the files of the languages infill works in (all
// of its table, or those of the `infill.languages` setting) through vscode-languageclient, and
// adds commands that run one of the server's code actions at the selection.
//
// What comes from the client library as it is: the server's code actions in the light-bulb menu,
// its syntax-error diagnostics, ghost text (the server offers textDocument/inlineCompletion),
// and its work-done progress ($/progress) in the status bar while the model runs.
// What this file adds: finding the server (a clear message with the install command when it is
// missing), settings (src/logic.ts decides what the server gets), the commands (list the code
// actions for the selection, pick one, resolve it under a cancellable notification, apply the
// edit), the `infill.languageIds` context key that narrows the menus and keys to the enabled
// languages, and a status bar item that says whether the server runs.

import { accessSync, constants, statSync } from 'node:fs';
import * as vscode from 'vscode';
import {
    CodeAction,
    CodeActionRequest,
    CodeActionResolveRequest,
    CodeActionTriggerKind,
    LanguageClient,
    LanguageClientOptions,
    ResponseError,
    ServerOptions,
    State,
    TransportKind,
    WorkspaceEdit,
} from 'vscode-languageclient/node';
import {
    CommandName,
    INSTALL_COMMAND,
    LANGUAGES_CONTEXT,
    alternativeCandidates,
    chooseAction,
    describeRange,
    effectiveCommand,
    findServer,
    kindsFor,
    documentSelector,
    enabledLanguageIds,
    missingServerMessage,
    nothingToDo,
    renamedSettingMessage,
    renamedSettingsInUse,
    requestErrorMessage,
    selectionToRange,
    serverSettings,
} from './logic';

const SECTION = 'infill';
const COMMANDS: Record<string, CommandName> = {
    'infill.fillSelection': 'fillSelection',
    'infill.fillNode': 'fillNode',
    'infill.fix': 'fix',
    'infill.addDocstring': 'addDocstring',
    'infill.addDocstringsInFile': 'addDocstringsInFile',
    'infill.alternatives': 'alternatives',
};

/** What a command did; returned to whoever ran it (the end-to-end test reads it). */
export interface CommandResult {
    applied: boolean;
    title?: string;
    message?: string;
}

let client: LanguageClient | undefined;
const warnedRenamed = new Set<string>(); // old setting names already warned about (once a session)
let starting: Promise<LanguageClient | undefined> | undefined;
let output: vscode.LogOutputChannel;
let status: vscode.StatusBarItem;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    output = vscode.window.createOutputChannel('infill', { log: true });
    status = vscode.window.createStatusBarItem('infill.status', vscode.StatusBarAlignment.Right, 100);
    status.name = 'infill';
    status.command = 'infill.showOutput';
    context.subscriptions.push(output, status);

    for (const [id, command] of Object.entries(COMMANDS)) {
        context.subscriptions.push(vscode.commands.registerCommand(id, () => runCommand(command)));
    }
    context.subscriptions.push(
        vscode.commands.registerCommand('infill.restartServer', restart),
        vscode.commands.registerCommand('infill.showOutput', () => output.show(true)),
        vscode.workspace.onDidChangeConfiguration((event) => {
            if (event.affectsConfiguration('infill.languages')) {
                void setLanguageContext();
            }
            const restartOn = ['infill.serverPath', 'infill.serverArgs', 'infill.languages'];
            if (restartOn.some((name) => event.affectsConfiguration(name))) {
                void restart();
            }
        }),
    );
    await setLanguageContext();
    await ensureClient();
}

/** The menus' and keys' `when` clauses test this context key: the languages of the setting. */
async function setLanguageContext(): Promise<void> {
    const enabled = enabledLanguageIds(vscode.workspace.getConfiguration(SECTION).get('languages'));
    await vscode.commands.executeCommand('setContext', LANGUAGES_CONTEXT, enabled);
}

export async function deactivate(): Promise<void> {
    await stopClient();
}

// ---------------------------------------------------------------------- the client

function setStatus(text: string, tooltip: string, error = false): void {
    status.text = text;
    status.tooltip = tooltip;
    status.backgroundColor = error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    status.show();
}

function isExecutable(path: string): boolean {
    try {
        accessSync(path, constants.X_OK);
        return statSync(path).isFile();
    } catch {
        return false;
    }
}

/** The running client, started on first use; undefined (after telling the user) if it cannot start. */
async function ensureClient(): Promise<LanguageClient | undefined> {
    if (client?.isRunning()) {
        return client;
    }
    starting ??= startClient().finally(() => {
        starting = undefined;
    });
    return starting;
}

async function startClient(): Promise<LanguageClient | undefined> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const serverPath = config.get<string>('serverPath');
    const folders = (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
    const command = findServer(serverPath, {
        pathEnv: process.env.PATH,
        workspaceFolders: folders,
        platform: process.platform,
        isExecutable,
    });
    if (command === undefined) {
        reportMissingServer(serverPath, 'not found');
        return undefined;
    }
    const args = config.get<string[]>('serverArgs') ?? [];
    const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
    const clientOptions: LanguageClientOptions = {
        documentSelector: documentSelector(config.get('languages')),
        initializationOptions: settingsForServer(config),
        synchronize: { configurationSection: SECTION }, // didChangeConfiguration: the server pulls again
        outputChannel: output,
        middleware: {
            workspace: {
                // The server asks for the `infill` section: give it only its own, set keys.
                configuration: async (params, token, next) => {
                    const answer = await next(params, token);
                    if (!Array.isArray(answer)) {
                        return answer;
                    }
                    return answer.map((value, index) =>
                        params.items[index]?.section === SECTION ? settingsForServer(value) : value,
                    );
                },
            },
            provideInlineCompletionItems: (document, position, context, token, next) => {
                if (!vscode.workspace.getConfiguration(SECTION, document).get<boolean>('inlineCompletion', true)) {
                    return undefined;
                }
                return next(document, position, context, token);
            },
        },
    };
    const created = new LanguageClient('infill', 'infill', serverOptions, clientOptions);
    created.onDidChangeState((event) => {
        if (event.newState === State.Running) {
            setStatus('$(sparkle) infill', `infill-lsp is running (${command}). Click for its output.`);
        } else if (event.newState === State.Stopped) {
            setStatus('$(warning) infill', 'infill-lsp stopped. Click for its output.', true);
        }
    });
    setStatus('$(loading~spin) infill', `starting ${command}`);
    output.info(`starting ${command} ${args.join(' ')}`);
    try {
        await created.start();
    } catch (error) {
        reportMissingServer(command, errorText(error));
        await created.dispose().catch(() => undefined);
        return undefined;
    }
    client = created;
    return client;
}

/** What the server gets from the `infill` section (logic.ts); warns once about each old name set. */
function settingsForServer(config: unknown): Record<string, unknown> {
    for (const old of renamedSettingsInUse(config)) {
        if (!warnedRenamed.has(old)) {
            warnedRenamed.add(old);
            output.warn(renamedSettingMessage(old));
            void vscode.window.showWarningMessage(renamedSettingMessage(old));
        }
    }
    return serverSettings(config);
}

async function stopClient(): Promise<void> {
    const stopping = client;
    client = undefined;
    if (stopping) {
        await stopping.dispose().catch((error) => output.info(`stopping: ${errorText(error)}`));
    }
}

async function restart(): Promise<void> {
    await stopClient();
    await ensureClient();
}

function reportMissingServer(serverPath: string | undefined, reason: string): void {
    const message = missingServerMessage(serverPath, reason);
    output.info(message);
    setStatus('$(error) infill', message, true);
    const copy = 'Copy install command';
    const settings = 'Open settings';
    void vscode.window.showErrorMessage(message, copy, settings).then(async (choice) => {
        if (choice === copy) {
            await vscode.env.clipboard.writeText(INSTALL_COMMAND);
        } else if (choice === settings) {
            await vscode.commands.executeCommand('workbench.action.openSettings', 'infill.serverPath');
        }
    });
}

function errorText(error: unknown): string {
    return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------- commands

/** List the server's code actions for the selection, run the one that fits ``command``. */
async function runCommand(requested: CommandName): Promise<CommandResult> {
    const editor = vscode.window.activeTextEditor;
    const enabled = enabledLanguageIds(vscode.workspace.getConfiguration(SECTION).get('languages'));
    if (editor === undefined || !enabled.includes(editor.document.languageId)) {
        return tell(`infill: open a file of a language infill works in first (${enabled.join(', ')}).`);
    }
    const running = await ensureClient();
    if (running === undefined) {
        return { applied: false, message: 'the language server is not running' };
    }
    const document = editor.document;
    const command = effectiveCommand(requested, editor.selection.isEmpty);
    const range = selectionToRange(editor.selection, (line) => document.lineAt(line).text.length);
    let listed: CodeAction[];
    try {
        listed = await listActions(running, document, range, command);
    } catch (error) {
        return failed('infill', error);
    }
    const action = chooseAction(command, listed);
    if (action === undefined) {
        return tell(nothingToDo(command, document.languageId));
    }
    output.info(`${action.title} (${describeRange(range)} of ${document.uri.fsPath})`);
    const version = document.version;
    let resolved: CodeAction;
    try {
        resolved = await vscode.window.withProgress(
            { location: vscode.ProgressLocation.Notification, title: action.title, cancellable: true },
            (_progress, token) => running.sendRequest(CodeActionResolveRequest.type, action, token),
        );
    } catch (error) {
        return failed(action.title, error);
    }
    if (command === 'alternatives') {
        try {
            return await pickAlternative(running, document, range, version);
        } catch (error) {
            return failed(action.title, error);
        }
    }
    return applyEdit(running, document, version, resolved.title, resolved.edit);
}

async function listActions(
    running: LanguageClient,
    document: vscode.TextDocument,
    range: ReturnType<typeof selectionToRange>,
    command: CommandName,
): Promise<CodeAction[]> {
    const answer = await running.sendRequest(CodeActionRequest.type, {
        textDocument: { uri: running.code2ProtocolConverter.asUri(document.uri) },
        range,
        context: { diagnostics: [], only: kindsFor(command), triggerKind: CodeActionTriggerKind.Invoked },
    });
    return (answer ?? []).filter((item): item is CodeAction => 'title' in item && !('command' in item && typeof item.command === 'string'));
}

/** After "fill selection (N alternatives)" has sampled them: offer every candidate, apply the pick. */
async function pickAlternative(
    running: LanguageClient,
    document: vscode.TextDocument,
    range: ReturnType<typeof selectionToRange>,
    version: number,
): Promise<CommandResult> {
    const candidates = alternativeCandidates(await listActions(running, document, range, 'alternatives'));
    if (candidates.length === 0) {
        return tell('infill: the model wrote no alternative for this selection.');
    }
    const items = candidates.map((action) => ({ label: action.title, detail: newTextOf(action.edit), action }));
    const picked = await vscode.window.showQuickPick(items, {
        title: 'infill: alternatives, best first',
        matchOnDetail: true,
    });
    if (picked === undefined) {
        return { applied: false, message: 'no alternative picked' };
    }
    return applyEdit(running, document, version, picked.action.title, picked.action.edit);
}

function newTextOf(edit: WorkspaceEdit | undefined): string {
    const texts: string[] = [];
    for (const change of edit?.documentChanges ?? []) {
        if ('edits' in change) {
            texts.push(...change.edits.map((textEdit) => ('newText' in textEdit ? textEdit.newText : textEdit.snippet.value)));
        }
    }
    for (const edits of Object.values(edit?.changes ?? {})) {
        texts.push(...edits.map((textEdit) => textEdit.newText));
    }
    return texts.join(' … ').replace(/\s+/g, ' ').trim();
}

/**
 * Apply the server's edit to ``document`` if it is still at ``version``. The server annotates
 * its edits as needing confirmation (the light-bulb menu shows a preview); a command the user
 * ran applies them directly (undo takes them back).
 */
async function applyEdit(
    running: LanguageClient,
    document: vscode.TextDocument,
    version: number,
    title: string,
    edit: WorkspaceEdit | undefined,
): Promise<CommandResult> {
    if (edit === undefined) {
        return { applied: false, title, message: 'no edit' };
    }
    if (document.version !== version) {
        return tell(requestErrorMessage(title, -32801, '') ?? title, title);
    }
    const converted = await running.protocol2CodeConverter.asWorkspaceEdit(edit);
    const plain = new vscode.WorkspaceEdit();
    let count = 0;
    for (const [uri, edits] of converted.entries()) {
        plain.set(uri, edits);
        count += edits.length;
    }
    if (count === 0) {
        return { applied: false, title, message: 'the model wrote the same text' };
    }
    const applied = await vscode.workspace.applyEdit(plain);
    return { applied, title, message: applied ? `${count} edit(s)` : 'VS Code refused the edit' };
}

function failed(title: string, error: unknown): CommandResult {
    const code = error instanceof ResponseError ? error.code : undefined;
    const cancelled = error instanceof vscode.CancellationError;
    const message = cancelled ? undefined : requestErrorMessage(title, code, errorText(error));
    if (message === undefined) {
        return { applied: false, title, message: 'cancelled' };
    }
    void vscode.window.showErrorMessage(message);
    return { applied: false, title, message };
}

function tell(message: string, title?: string): CommandResult {
    void vscode.window.showInformationMessage(message);
    return { applied: false, title, message };
}
