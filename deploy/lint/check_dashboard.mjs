// Type-checks deploy/grafana/neupims.json against Grafana's own dashboard type
// (@grafana/schema `Dashboard`) with the TypeScript compiler: the JSON is placed as an object
// literal in a virtual .ts file, so literal unions are checked and unknown fields are errors
// (excess property checks). Nothing is written to disk.
// Usage: node check_dashboard.mjs [dashboard.json]; exit 0 if it type-checks.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const here = path.dirname(fileURLToPath(import.meta.url));
const jsonPath = process.argv[2] ?? path.join(here, '..', 'grafana', 'neupims.json');
const dashboard = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
const virtualPath = path.join(here, '__dashboard_check__.ts');
const source = `import type { Dashboard } from '@grafana/schema';
const dashboard: Dashboard = ${JSON.stringify(dashboard, null, 2)};
export default dashboard;
`;
const options = {
  strict: true, noEmit: true, target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler, skipLibCheck: true,
};
const host = ts.createCompilerHost(options);
const readFile = host.readFile.bind(host);
const getSourceFile = host.getSourceFile.bind(host);
host.fileExists = (f) => f === virtualPath || ts.sys.fileExists(f);
host.readFile = (f) => (f === virtualPath ? source : readFile(f));
host.getSourceFile = (f, lang, onError, create) =>
  f === virtualPath ? ts.createSourceFile(f, source, lang, true) : getSourceFile(f, lang, onError, create);
const program = ts.createProgram([virtualPath], options, host);
const diagnostics = ts.getPreEmitDiagnostics(program);
for (const d of diagnostics) {
  const where = d.file && d.start !== undefined
      ? (() => { const { line } = d.file.getLineAndCharacterOfPosition(d.start);
                 return `${d.file.fileName === virtualPath ? jsonPath + ' (as TypeScript)' : d.file.fileName}:${line + 1}: `; })()
      : '';
  console.error(where + ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}
if (diagnostics.length > 0) process.exit(1);
const panels = (dashboard.panels ?? []).filter((p) => p.type !== 'row');
console.log(`${jsonPath}: a valid @grafana/schema Dashboard (${panels.length} panels)`);
