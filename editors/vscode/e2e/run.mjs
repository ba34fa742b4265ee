// The infill extension in a real VS Code: code-server serves the workbench, headless Chromium
// (puppeteer-core) shows it, and the test-only driver extension (e2e/driver) runs "fill
// selection" through the infill extension and the real infill-lsp, then writes a result file.
// Run by tests/editors/test_vscode_e2e.py, which prepares the workspace and checks the file; needs Node 24
// (code-server's), so run it with that node:
//
//   node e2e/run.mjs --code-server BIN --chromium BIN --workspace DIR --work DIR \
//       --vsix dist/infill.vsix --vsix dist/infill-e2e-driver.vsix --settings settings.json \
//       --result DIR/.infill-e2e/result.json --screenshot shot.png [--timeout 240]
//
// Prints one JSON line: {"ok": ..., "times": {...}} (seconds since start of each phase).
// Everything it starts (code-server and its helpers, the browser) is stopped before it exits.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';

const { values: args } = parseArgs({
    options: {
        'code-server': { type: 'string' },
        chromium: { type: 'string' },
        workspace: { type: 'string' },
        work: { type: 'string' },
        vsix: { type: 'string', multiple: true },
        settings: { type: 'string' },
        result: { type: 'string' },
        screenshot: { type: 'string' },
        timeout: { type: 'string', default: '240' },
    },
});
for (const name of ['code-server', 'chromium', 'workspace', 'work', 'vsix', 'result', 'screenshot']) {
    if (!args[name]) {
        console.error(`run.mjs: --${name} is required`);
        process.exit(2);
    }
}

const started = Date.now();
const times = {};
const mark = (name) => {
    times[name] = (Date.now() - started) / 1000;
};
const deadline = started + Number(args.timeout) * 1000;
const userData = join(args.work, 'user-data');
const extensions = join(args.work, 'extensions');
const serverLog = join(args.work, 'code-server.log');
mkdirSync(join(userData, 'User'), { recursive: true });
mkdirSync(extensions, { recursive: true });
// code-server's launcher is a node script: this node (Node 24) goes first on PATH.
const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` };
const common = ['--config', '/dev/null', '--user-data-dir', userData, '--extensions-dir', extensions];

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

function freePort() {
    return new Promise((resolve, reject) => {
        const server = createServer();
        server.on('error', reject);
        server.listen(0, '127.0.0.1', () => {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

// User settings: quiet workbench, then the test's own (infill.serverPath, ...).
const settings = {
    'telemetry.telemetryLevel': 'off',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'update.mode': 'none',
    'security.workspace.trust.enabled': false,
    'window.commandCenter': false,
    'chat.disableAIFeatures': true,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    ...(args.settings ? JSON.parse(readFileSync(args.settings, 'utf8')) : {}),
};
writeFileSync(join(userData, 'User', 'settings.json'), JSON.stringify(settings, null, 2));

// 1. Install the extensions from their .vsix files (the marketplace is not reachable).
const install = spawnSync(
    args['code-server'],
    [...common, ...args.vsix.flatMap((vsix) => ['--install-extension', vsix]), '--force'],
    { env, encoding: 'utf8', timeout: 120_000 },
);
if (install.status !== 0) {
    console.error(install.stdout, install.stderr);
    console.log(JSON.stringify({ ok: false, error: 'extension install failed', times }));
    process.exit(1);
}
mark('installed');

// 2. Serve; wait for /healthz.
const port = await freePort();
const log = openSync(serverLog, 'a');
const server = spawn(
    args['code-server'],
    [
        ...common,
        '--auth', 'none',
        '--bind-addr', `127.0.0.1:${port}`,
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        '--disable-getting-started-override',
        args.workspace,
    ],
    { env, detached: true, stdio: ['ignore', log, log] }, // detached: its own process group
);
let browser;
let outcome = { ok: false };
try {
    const base = `http://127.0.0.1:${port}`;
    for (;;) {
        if (Date.now() > deadline) {
            throw new Error(`code-server did not answer ${base}/healthz`);
        }
        try {
            if ((await fetch(`${base}/healthz`)).ok) {
                break;
            }
        } catch {
            // not listening yet
        }
        await sleep(200);
    }
    mark('serving');

    // 3. Open the workbench: the extension host starts when a browser connects.
    browser = await puppeteer.launch({
        executablePath: args.chromium,
        headless: true,
        args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--window-size=1280,800'],
        defaultViewport: { width: 1280, height: 800 },
        userDataDir: join(args.work, 'chromium'),
    });
    const page = await browser.newPage();
    const consoleErrors = [];
    page.on('console', (message) => {
        if (message.type() === 'error') {
            consoleErrors.push(message.text().slice(0, 300));
        }
    });
    await page.goto(`${base}/?folder=${encodeURIComponent(args.workspace)}`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.monaco-workbench', { timeout: Math.max(1000, deadline - Date.now()) });
    mark('workbench');

    // 4. Wait for the driver's result, then let the editor paint the edit and take the picture.
    while (!existsSync(args.result)) {
        if (Date.now() > deadline) {
            await page.screenshot({ path: args.screenshot });
            throw new Error(`no result from the driver extension after ${args.timeout} s`);
        }
        await sleep(200);
    }
    mark('result');
    const result = JSON.parse(readFileSync(args.result, 'utf8'));
    await sleep(1500);
    await page.screenshot({ path: args.screenshot });
    mark('screenshot');
    outcome = { ok: Boolean(result.ok), driver: result, consoleErrors: consoleErrors.slice(0, 10) };
} catch (error) {
    outcome = { ok: false, error: String(error?.stack ?? error) };
} finally {
    if (browser) {
        await browser.close().catch(() => undefined);
    }
    try {
        process.kill(-server.pid, 'SIGTERM'); // code-server and the helpers it started
    } catch {
        // already gone
    }
    for (let i = 0; i < 20; i++) {
        try {
            process.kill(-server.pid, 0);
        } catch {
            break;
        }
        await sleep(100);
        if (i === 19) {
            try {
                process.kill(-server.pid, 'SIGKILL');
            } catch {
                // gone
            }
        }
    }
    mark('stopped');
}
outcome.times = times;
outcome.serverLog = serverLog;
console.log(JSON.stringify(outcome));
process.exit(outcome.ok ? 0 : 1);
