// Test only (editors/vscode/e2e/run.mjs installs it next to the infill extension): when the
// workspace has .infill-e2e/spec.json, open the file it names, select whole lines, run the infill
// extension's "fill selection" command (the real extension, the real infill-lsp), save, and
// write what happened to the spec's result file. The browser only has to show the workbench.
//
// spec.json: {"file": "a.py", "startLine": 5, "endLine": 6, "result": "/abs/result.json"}
// (0-based lines, inclusive; the selection runs from column 0 of startLine to column 0 of the
// line after endLine, as a linewise selection does).

const fs = require('fs');
const path = require('path');
const vscode = require('vscode');

const SPEC = path.join('.infill-e2e', 'spec.json');

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
        const selection = new vscode.Selection(spec.startLine, 0, spec.endLine + 1, 0);
        editor.selection = selection;
        editor.revealRange(selection, vscode.TextEditorRevealType.InCenter);
        // What the light-bulb menu offers here (the client's code action provider).
        const actions = await vscode.commands.executeCommand('vscode.executeCodeActionProvider', uri, selection);
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
        result.ok = true;
    } catch (error) {
        result.error = String((error && error.stack) || error);
    }
    const temporary = `${spec.result}.part`;
    fs.writeFileSync(temporary, JSON.stringify(result, null, 2));
    fs.renameSync(temporary, spec.result);
}

function deactivate() {}

module.exports = { activate, deactivate };
