/**
 * The TypeScript types of the custom resources (types.ts) and the CRD schemas the API server enforces
 * (crds/*.yaml) agree field by field: the same fields at every level of `spec` and `status`, the same
 * required ones, the same kind of value (string, integer/number, boolean, array, object), and a
 * string-literal union in TS lists exactly the CRD's enum (a plain `string` may stand for an enum: the
 * API server checks it). Read with the TypeScript compiler, so a field added on one side only fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const TYPES = join(import.meta.dirname, 'types.ts');

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  additionalProperties?: Schema | boolean;
}

function crdSchema(file: string): Schema {
  const crd = parse(readFileSync(join(ROOT, 'crds', file), 'utf8')) as {
    spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: Schema } }> };
  };
  const v = crd.spec.versions.find((x) => x.name === 'v1alpha1');
  if (!v) throw new Error(`${file}: no v1alpha1 version`);
  return v.schema.openAPIV3Schema;
}

const program = ts.createProgram([TYPES], {
  strict: true,
  exactOptionalPropertyTypes: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  noEmit: true,
});
const checker = program.getTypeChecker();

function exported(name: string): ts.Type {
  const source = program.getSourceFile(TYPES);
  const sym = source && checker.getSymbolAtLocation(source);
  const found = sym && checker.getExportsOfModule(sym).find((s) => s.name === name);
  if (!found) throw new Error(`types.ts exports no ${name}`);
  return checker.getDeclaredTypeOfSymbol(found);
}

const nonUndefined = (t: ts.Type): ts.Type[] =>
  t.isUnion() ? t.types.filter((x) => !(x.flags & ts.TypeFlags.Undefined)) : [t];

/** Differences between a TS type and a schema, as `path: what`. */
function compare(t: ts.Type, s: Schema, path: string): string[] {
  const parts = nonUndefined(t);
  const all = (flag: ts.TypeFlags) => parts.every((p) => p.flags & flag);
  const shown = checker.typeToString(t);
  switch (s.type) {
    case 'string': {
      if (!all(ts.TypeFlags.StringLike)) return [`${path}: CRD string, TS ${shown}`];
      const literals = parts.filter((p) => p.isStringLiteral()).map((p) => (p as ts.StringLiteralType).value);
      if (literals.length === parts.length && s.enum) {
        const want = [...s.enum].map(String).sort();
        if (JSON.stringify(literals.sort()) !== JSON.stringify(want))
          return [`${path}: CRD enum ${want.join('|')}, TS ${literals.join('|')}`];
      }
      return [];
    }
    case 'integer':
    case 'number':
      return all(ts.TypeFlags.NumberLike) ? [] : [`${path}: CRD ${s.type}, TS ${shown}`];
    case 'boolean':
      return all(ts.TypeFlags.BooleanLike) ? [] : [`${path}: CRD boolean, TS ${shown}`];
    case 'array': {
      const [arr] = parts;
      if (parts.length !== 1 || !arr || !checker.isArrayType(arr)) return [`${path}: CRD array, TS ${shown}`];
      const [item] = checker.getTypeArguments(arr as ts.TypeReference);
      return item && s.items ? compare(item, s.items, `${path}[]`) : [];
    }
    case 'object': {
      const [obj] = parts;
      if (parts.length !== 1 || !obj || !(obj.flags & ts.TypeFlags.Object))
        return [`${path}: CRD object, TS ${shown}`];
      if (!s.properties) return []; // a map or free-form object: its entries are not fields
      const out: string[] = [];
      const props = checker.getPropertiesOfType(obj);
      const tsNames = new Set(props.map((p) => p.name));
      for (const name of Object.keys(s.properties))
        if (!tsNames.has(name)) out.push(`${path}.${name}: in the CRD, not in TS`);
      for (const p of props) {
        const sub = s.properties[p.name];
        if (!sub) {
          out.push(`${path}.${p.name}: in TS, not in the CRD`);
          continue;
        }
        const optional = (p.flags & ts.SymbolFlags.Optional) !== 0;
        const required = s.required?.includes(p.name) ?? false;
        if (optional === required)
          out.push(`${path}.${p.name}: ${required ? 'required' : 'optional'} in the CRD, not in TS`);
        out.push(...compare(checker.getTypeOfSymbol(p), sub, `${path}.${p.name}`));
      }
      return out;
    }
    default:
      return [`${path}: CRD type ${s.type ?? '(none)'} is not compared`];
  }
}

/** The resource's spec and status against the CRD's (metadata is Kubernetes' own). */
function differences(typeName: string, schema: Schema): string[] {
  const t = exported(typeName);
  const props = schema.properties ?? {};
  const top = checker.getPropertiesOfType(t).map((p) => p.name);
  const out =
    JSON.stringify([...top].sort()) === JSON.stringify(Object.keys(props).sort())
      ? []
      : [`top level: ${top}`];
  for (const field of ['spec', 'status'] as const) {
    const p = t.getProperty(field);
    const s = props[field];
    if (!p || !s) out.push(`${field}: missing`);
    else out.push(...compare(checker.getTypeOfSymbol(p), s, field));
  }
  return out;
}

describe('CRD schemas and TypeScript types agree', () => {
  it('App (crds/apphost.dev_apps.yaml)', () => {
    expect(differences('App', crdSchema('apphost.dev_apps.yaml'))).toEqual([]);
  });

  it('DomainAssignment (crds/apphost.dev_domainassignments.yaml)', () => {
    expect(differences('DomainAssignment', crdSchema('apphost.dev_domainassignments.yaml'))).toEqual([]);
  });

  it('notices a field on one side only, a changed requirement, kind or enum', () => {
    const schema = crdSchema('apphost.dev_apps.yaml');
    const spec = schema.properties?.spec as Schema;
    const props = spec.properties as Record<string, Schema>;
    const changed: Schema = {
      ...schema,
      properties: {
        ...schema.properties,
        spec: {
          ...spec,
          required: ['runtime', 'image'],
          properties: {
            ...props,
            extra: { type: 'string' },
            port: { type: 'string' },
            runtime: { type: 'string', enum: ['cortex'] },
            scaling: {
              ...props.scaling,
              properties: Object.fromEntries(
                Object.entries(props.scaling?.properties ?? {}).filter(([k]) => k !== 'cooldownSeconds'),
              ),
            },
          },
        },
      },
    };
    expect(differences('App', changed).sort()).toEqual(
      [
        'spec.extra: in the CRD, not in TS',
        'spec.image: required in the CRD, not in TS',
        'spec.port: CRD string, TS number | undefined',
        'spec.runtime: CRD enum cortex, TS cortex|custom',
        'spec.scaling.cooldownSeconds: in TS, not in the CRD',
      ].sort(),
    );
  });
});
