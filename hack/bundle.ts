/**
 * Bundles a gateway entry of compiled JavaScript (tsc's output) in place with esbuild: the entry file
 * becomes one ES module holding the modules it imports, ours and node_modules' alike; a lazy `import()`
 * stays lazy (the module's code runs on first use). Why: Node spends memory per module it loads — the
 * gateway loaded ~445 — and an idle gateway loaded from one file is ~12 MiB smaller (zod alone: +14.7 MiB
 * as its ~95 modules, +6.5 bundled). docs/benchmarks.md, "The gateway bundled (issue 16, seventh round)".
 *
 * The source map is written next to the bundle (`main.js.map`, chained to tsc's maps: it names src/*.ts)
 * but not linked from it: Node would load it at start under --enable-source-maps, ~10 MiB of
 * an idle gateway. Stack traces name the bundle's lines; its `// dist/<module>.js` comments say which module
 * a line is from, and the map translates offline.
 *
 * `node hack/bundle.ts [dist]` (`make build`, the image build) bundles `<dist>/gateway/main.js`, what
 * `apphost gateway` loads; bench/support/parts.ts bundles the benchmark's gateway entry the same way.
 * Run it on tsc's fresh output only: a bundle is not bundled again.
 */
import { readFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { build, type Plugin } from 'esbuild';

/** First line of every bundle: how a second run tells a bundle from tsc's output. */
export const BUNDLE_MARK = '// bundled by hack/bundle.ts';
/**
 * Gives the bundle a `require`: esbuild's wrappers of the CommonJS packages (pino, prom-client...) call it.
 * Taken with process.getBuiltinModule, as every built-in the bundle imports (builtinsWithoutFacades).
 */
const REQUIRE_SHIM =
  "const require = process.getBuiltinModule('node:module').createRequire(import.meta.url);";
/**
 * Left to node_modules: the fallback Kubernetes client for kubeconfigs the gateway's own reader does not
 * handle (exec, auth-provider...), loaded only then; ~870 generated modules not worth bundling.
 */
export const EXTERNAL = ['@kubernetes/client-node'];

/**
 * Left to node_modules too: packages the gateway only loads with `import()` when it needs them — yaml
 * reads a kubeconfig file (src/shared/kube/access.ts), which an in-cluster gateway never does. In the
 * bundle its ~260 KB of code (~0.8 MiB of RSS at load) would be held by every gateway, unused.
 */
export const LAZY_PACKAGES = ['yaml'];

/**
 * A bundle imports its external packages at its top, whichever module imported them: a module reached
 * through `import()` that imports one stays tsc's module next to the bundle, imported lazily from there
 * (src/gateway/kube-client.ts's client-node fallback), or the gateway would load client-node at start.
 */
function lazyExternals(outdir: string): Plugin {
  const importsExternal = (text: string) =>
    EXTERNAL.some((pkg) => text.includes(`from '${pkg}'`) || text.includes(`from "${pkg}"`));
  return {
    name: 'lazy-externals',
    setup(b) {
      b.onResolve({ filter: /^\./ }, async (args) => {
        if (args.kind !== 'dynamic-import') return undefined;
        const path = resolve(args.resolveDir, args.path);
        if (!importsExternal(await readFile(path, 'utf8'))) return undefined;
        const fromOut = relative(outdir, path).split(sep).join('/');
        return { path: fromOut.startsWith('.') ? fromOut : `./${fromOut}`, external: true };
      });
    },
  };
}

/**
 * zod's index (and `zod/mini`, `zod/v4/core`) re-exports its ~45 locales as the `locales` namespace; the
 * namespace object keeps them all in the bundle (~400 KB of code, ~1 MiB of RSS at load). We never use
 * `z.locales`: zod's English messages come from `locales/en.js`, which it imports itself. So its locales
 * index is bundled as an empty module; `en.js` stays.
 */
function withoutZodLocales(): Plugin {
  return {
    name: 'without-zod-locales',
    setup(b) {
      b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
        /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer)
          ? { path: 'zod-locales', namespace: 'without-zod-locales' }
          : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'without-zod-locales' }, () => ({
        contents: 'export {};',
        loader: 'js',
      }));
    },
  };
}

/**
 * The built-ins the bundle imports (`import { createServer } from 'node:http'`) are taken with
 * `process.getBuiltinModule()`, not linked by Node's ES module loader. For a built-in imported from an ES
 * module Node builds a facade that copies every export when it links, getters included: node:http's
 * `WebSocket`, `CloseEvent` and `MessageEvent` getters load Node's own fetch bundle (its undici, with web
 * streams), node:crypto's `webcrypto`/`subtle` load Web Crypto, node:fs's `promises` loads fs/promises —
 * ~2 MiB of an idle gateway that never uses them (docs/benchmarks.md, thirteenth round). Each built-in
 * becomes a module of the bundle that exports its data properties, read once at start as the facade did,
 * and `default` (the module itself). A getter is not exported, so importing one by name fails the build
 * ("No matching export"): read it from the default export where it is used.
 */
function builtinsWithoutFacades(): Plugin {
  return {
    name: 'builtins-without-facades',
    setup(b) {
      b.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) => {
        if (args.kind !== 'import-statement' || !isBuiltin(args.path)) return undefined;
        const id = args.path.startsWith('node:') ? args.path : `node:${args.path}`;
        return { path: id, namespace: 'node-builtin' };
      });
      b.onLoad({ filter: /.*/, namespace: 'node-builtin' }, (args) => {
        const m = process.getBuiltinModule(args.path) as Record<string, unknown>;
        const values = Object.keys(m).filter(
          (k) => k !== 'default' && 'value' in (Object.getOwnPropertyDescriptor(m, k) ?? {}),
        );
        const lines = [
          `const m = process.getBuiltinModule(${JSON.stringify(args.path)});`,
          'export default m;',
          ...values.map(
            (k, i) => `const v${i} = m[${JSON.stringify(k)}];\nexport { v${i} as ${JSON.stringify(k)} };`,
          ),
        ];
        return { contents: lines.join('\n'), loader: 'js' };
      });
    },
  };
}

export async function bundleGatewayEntry(entry: string): Promise<void> {
  const file = resolve(entry);
  if ((await readFile(file, 'utf8')).startsWith(BUNDLE_MARK))
    throw new Error(`${entry} is a bundle already; compile it with tsc first`);
  const result = await build({
    entryPoints: [file],
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node22.18',
    outfile: file,
    allowOverwrite: true,
    external: [...EXTERNAL, ...LAZY_PACKAGES],
    plugins: [lazyExternals(dirname(file)), withoutZodLocales(), builtinsWithoutFacades()],
    sourcemap: 'external',
    sourcesContent: false,
    banner: { js: `${BUNDLE_MARK}\n${REQUIRE_SHIM}` },
    logLevel: 'warning',
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${result.errors.map((e) => e.text).join('; ')}`);
}

if (import.meta.main) await bundleGatewayEntry(join(process.argv[2] ?? 'dist', 'gateway', 'main.js'));
