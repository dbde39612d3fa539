/**
 * The floor plan of src/ (docs/architecture.md, Layers), checked by `npm run lint` and so by CI:
 *   kernel (lib/, config*.ts, policy/, crypto/, blob/, store/, storage/, metrics/, access/,
 *   indexing/, audit/) < http/ (Fastify glue) < modules/<feature>/ < the composition root (deps.ts,
 *   app.ts, consent-app.ts, main.ts).
 * A floor imports only the floors below it; features import each other's services, in one
 * direction. Unit tests beside the code (*.test.ts) and everything under test/ may import anything.
 * test/layers.test.ts shows that each rule fails on a deliberately bad import.
 */

/** The composition root: the only files that see every floor. */
const ROOT = '^src/(deps|app|consent-app|main|coffer)[.]ts$'
const TESTS = '[.]test[.]ts$'

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'feature-imported-from-below',
      comment:
        'Only features and the composition root may import src/modules/: the kernel and the ' +
        'HTTP glue know no feature. Need something a feature does? Declare a port (an interface ' +
        'in the kernel or in http/) and let src/deps.ts hand the feature over.',
      severity: 'error',
      from: { path: '^src/', pathNot: [ROOT, '^src/modules/', TESTS] },
      to: { path: '^src/modules/' },
    },
    {
      name: 'http-imported-from-kernel',
      comment:
        'The kernel is the ground floor: it knows no Fastify glue (src/http/). Move what both ' +
        'need down into the kernel.',
      severity: 'error',
      from: { path: '^src/', pathNot: [ROOT, '^src/modules/', '^src/http/', TESTS] },
      to: { path: '^src/http/' },
    },
    {
      name: 'composition-root-imported',
      comment:
        'deps.ts, app.ts, consent-app.ts, main.ts and coffer.ts (the entry) wire everything together: nothing they ' +
        'wire may import them back.',
      severity: 'error',
      from: { path: '^src/', pathNot: [ROOT, TESTS] },
      to: { path: ROOT },
    },
    {
      name: 'foreign-repo',
      comment:
        "A module reaches another module's data through that module's service, never its " +
        'repo: the service is where its rules (access, encryption, indexing) are kept.',
      severity: 'error',
      from: { path: '^src/modules/([^/]+)/', pathNot: TESTS },
      to: { path: '^src/modules/[^/]+/.*[.]repo[.]ts$', pathNot: '^src/modules/$1/' },
    },
    {
      name: 'foreign-module-subfolder',
      comment:
        'Another module is reached through the files at the top of its folder (its service), ' +
        'never through a file in a subfolder of it or a file loose in src/modules/: the ' +
        'module-cycle rule sees each folder as a node, so an import into a subfolder would count ' +
        'as an import of that subfolder, not of the module, and could hide a module cycle.',
      severity: 'error',
      from: { path: '^src/modules/([^/]+)/', pathNot: TESTS },
      to: { path: '^src/modules/', pathNot: ['^src/modules/$1/', '^src/modules/[^/]+/[^/]+$'] },
    },
    {
      name: 'file-cycle',
      comment:
        'No file may reach itself through its imports (type imports included): a cycle makes ' +
        'the load order matter and ties the files into one piece. Move what both need into a ' +
        'third file, or pass it in.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'module-cycle',
      comment:
        'Features depend on each other in one direction: two modules that import each other ' +
        '(even through other modules, and even when no file cycle exists) are one feature in ' +
        'two folders. Break it with a port in the kernel, implemented by one of them and wired ' +
        "in src/deps.ts. Checked on folders: a module's subfolders add their imports to it, and " +
        'foreign-module-subfolder keeps other modules from importing into them.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/modules/[^/]+$' },
      to: { path: '^src/modules/[^/]+$', circular: true },
    },
  ],
  options: {
    // Type-only imports count: a type is as much a dependency on another floor's vocabulary.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Only our own files: packages and Node built-ins are not floors of the house.
    includeOnly: '^src/',
    // Folder-level results, which the module-cycle rule reads.
    metrics: true,
  },
}
