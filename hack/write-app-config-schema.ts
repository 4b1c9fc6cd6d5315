/**
 * Writes schemas/apphost.schema.json, the JSON Schema of apphost.toml for editors, from the zod schema
 * (src/apis/v1alpha1/app-config.ts). A test fails when the committed file is stale.
 * Usage: node hack/write-app-config-schema.ts
 */
import { writeFileSync } from 'node:fs';
import { appConfigJsonSchemaText } from '../src/apis/v1alpha1/app-config.ts';

const file = new URL('../schemas/apphost.schema.json', import.meta.url);
writeFileSync(file, appConfigJsonSchemaText());
process.stdout.write(`wrote ${file.pathname}\n`);
