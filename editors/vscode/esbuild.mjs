// Bundle the extension and vscode-languageclient into dist/extension.js (the .vsix then needs
// no node_modules). `vscode` is provided by the editor at run time.
import { build } from 'esbuild';

await build({
    entryPoints: ['src/extension.ts'],
    bundle: true,
    outfile: 'dist/extension.js',
    format: 'cjs',
    platform: 'node',
    target: 'node18',
    external: ['vscode'],
    sourcemap: false,
    minifyWhitespace: true, // identifiers stay readable in stack traces
    minifySyntax: true,
    logLevel: 'warning',
});
