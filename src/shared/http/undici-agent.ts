/**
 * undici's `Agent` and `errors` without undici's index. The index also loads fetch, WebSocket, EventSource,
 * the HTTP cache, the mock agents and the interceptors — ~11 MiB of a process's RSS (~6 MiB of an idle
 * gateway's, docs/benchmarks.md) that the processes importing this never use. These are undici's own
 * modules, the ones its index re-exports (undici-agent.test.ts checks that they are the same objects), and
 * the request API (`request`, `stream`, `pipeline`, ...) is put on every Dispatcher as the index does, so
 * `agent.request()` works with or without the index loaded. Import `Dispatcher` and other types from
 * 'undici' with `import type`.
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const require = createRequire(import.meta.url);
const dispatcher = require('undici/lib/dispatcher/dispatcher') as { prototype: object };
// undici's index.js: `Object.assign(Dispatcher.prototype, api)`.
Object.assign(dispatcher.prototype, require('undici/lib/api'));

export const Agent = require('undici/lib/dispatcher/agent') as typeof Undici.Agent;
export const errors = require('undici/lib/core/errors') as typeof Undici.errors;
