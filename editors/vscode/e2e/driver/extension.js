// Test only (editors/vscode/e2e/run.mjs installs it next to the infill extension): when the
// workspace has .infill-e2e/spec.json, open the file it names, select whole lines, run the infill
// extension's "fill selection" command (the real extension, the real infill-lsp), save, and
// write what happened to the spec's result file. The browser only has to show the workbench.
//
// spec.json: {"file": "a.py", "startLine": 5, "endLine": 6, "result": "/abs/result.json"}
// (0-based lines, inclusive; the selection runs from column 0 of startLine to column 0 of the
// line after endLine, as a linewise selection does).
//
// With "mode": "review" (and "needle": "-=", "waitSeconds": 150) the driver instead waits for
// the server's review diagnostics (source "infill", code "review"), puts the cursor at the start
// of the one over `needle`, lists the light bulb's quick fixes there and runs the extension's
// "fix" command (which takes the preferred quick fix), then saves.

const fs = require('fs');
const path = require('path');
const vscode = require('vscode');

const SPEC = path.join('.infill-e2e', 'spec.json');

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The code actions VS Code's light bulb would list for `range`. VS Code at times cancels the
 * request on its side ("Canceled" in two full test runs out of three, the TypeScript case, while
 * the server had answered it; a user's light bulb just asks again); so a cancelled request is
 * asked again, twice at most, and counted in `result.cancelled`.
 */
async function codeActions(uri, range, result) {
    for (let attempt = 0; ; attempt += 1) {
        try {
            return await vscode.commands.executeCommand('vscode.executeCodeActionProvider', uri, range);
        } catch (error) {
            if (attempt >= 2 || !/Canceled/.test(String(error))) {
                throw error;
            }
            result.cancelled = (result.cancelled || 0) + 1;
            await sleep(500);
        }
    }
}

function codeOf(diagnostic) {
    const code = diagnostic.code;
    return code !== null && typeof code === 'object' ? String(code.value) : String(code);
}

/** Wait for the review diagnostics of `uri`; put the cursor on the one over `spec.needle`; fix it. */
async function review(spec, uri, document, editor, result, mark) {
    const deadline = Date.now() + 1000 * (spec.waitSeconds || 150);
    const ours = () =>
        vscode.languages.getDiagnostics(uri).filter((d) => d.source === 'infill' && codeOf(d) === 'review');
    while (ours().length === 0) {
        if (Date.now() > deadline) {
            throw new Error(`no review diagnostics after ${spec.waitSeconds || 150} s`);
        }
        await sleep(250);
    }
    mark('diagnostics');
    const shown = ours();
    result.diagnostics = shown.map((d) => ({
        message: d.message,
        severity: d.severity,
        code: codeOf(d),
        source: d.source,
        range: [d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character],
        text: document.getText(d.range),
    }));
    const target = shown.find((d) => document.getText(d.range) === spec.needle);
    if (!target) {
        throw new Error(`no review diagnostic over ${JSON.stringify(spec.needle)}`);
    }
    result.target = result.diagnostics[shown.indexOf(target)];
    editor.selection = new vscode.Selection(target.range.start, target.range.start);
    const actions = await codeActions(uri, target.range, result);
    result.lightBulb = (actions || []).map((action) => action.title);
    mark('listed');
    result.command = await vscode.commands.executeCommand('infill.fix');
    mark('fixed');
}

async function activate() {
    const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
    if (!folder || !fs.existsSync(path.join(folder.uri.fsPath, SPEC))) {
        return;
    }
    const spec = JSON.parse(fs.readFileSync(path.join(folder.uri.fsPath, SPEC), 'utf8'));
    const result = { ok: false, times: {} };
    const started = Date.now();
    const mark = (name) => {
        result.times[name] = (Date.now() - started) / 1000;
    };
    try {
        const uri = vscode.Uri.file(path.join(folder.uri.fsPath, spec.file));
        const document = await vscode.workspace.openTextDocument(uri);
        const editor = await vscode.window.showTextDocument(document, { preview: false });
        const infill = vscode.extensions.getExtension('infill.infill');
        if (!infill) {
            throw new Error('the infill extension (infill.infill) is not installed');
        }
        await infill.activate(); // starts infill-lsp
        mark('activated');
        if (spec.mode === 'review') {
            await review(spec, uri, document, editor, result, mark);
            result.saved = await document.save();
            result.dirty = document.isDirty;
            mark('saved');
        } else {
            await fill(spec, uri, document, editor, result, mark);
        }
        result.ok = true;
    } catch (error) {
        result.error = String((error && error.stack) || error);
    }
    const temporary = `${spec.result}.part`;
    fs.writeFileSync(temporary, JSON.stringify(result, null, 2));
    fs.renameSync(temporary, spec.result);
}

/** Select whole lines, run "fill selection", save, and select what was filled. */
async function fill(spec, uri, document, editor, result, mark) {
    const selection = new vscode.Selection(spec.startLine, 0, spec.endLine + 1, 0);
    editor.selection = selection;
    editor.revealRange(selection, vscode.TextEditorRevealType.InCenter);
    // What the light-bulb menu offers here (the client's code action provider).
    const actions = await codeActions(uri, selection, result);
    result.lightBulb = (actions || []).map((action) => action.title);
    mark('listed');
    result.command = await vscode.commands.executeCommand('infill.fillSelection');
    mark('filled');
    result.saved = await document.save();
    result.dirty = document.isDirty;
    mark('saved');
    // Show what was filled: select it (the lines from startLine to where the old suffix begins).
    const lines = document.lineCount - spec.linesAfter;
    editor.selection = new vscode.Selection(spec.startLine, 0, Math.max(spec.startLine, lines), 0);
}

function deactivate() {}

module.exports = { activate, deactivate };
