// The client's types, generated from the service's committed OpenAPI document
// (docs/openapi.json): one interface per schema, and one entry per operation naming its
// method, path, parameters, body and answer. `--check` exits 1 when the file on disk
// differs from what the document gives (CI runs it: the client cannot drift from the
// service). No dependency: Node's own modules only.
import { readFileSync, writeFileSync } from "node:fs";

const [, , source, target, flag] = process.argv;
const doc = JSON.parse(readFileSync(source, "utf8"));

const refName = (ref) => ref.replace("#/components/schemas/", "");
const ident = (name) => name.replace(/[^A-Za-z0-9_]/g, "_");
const key = (name) => (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name));

// A JSON Schema (the subset Litestar writes for msgspec Structs) as a TypeScript type.
function type(schema) {
  if (schema === undefined || schema === true || Object.keys(schema).length === 0) return "unknown";
  if (schema.$ref) return ident(refName(schema.$ref));
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const union = schema.oneOf ?? schema.anyOf;
  if (union) return [...new Set(union.map((s) => paren(type(s))))].join(" | ");
  if (Array.isArray(schema.type)) return schema.type.map((t) => type({ ...schema, type: t })).join(" | ");
  switch (schema.type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      if (schema.prefixItems) return `[${schema.prefixItems.map(type).join(", ")}]`;
      return `${paren(type(schema.items))}[]`;
    case "object":
      return objectType(schema, "  ");
    default:
      return "unknown";
  }
}

function paren(t) {
  return t.includes(" | ") ? `(${t})` : t;
}

function objectType(schema, indent) {
  const props = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const lines = Object.keys(props).map((name) => {
    const doc = props[name].description ? `${indent}  /** ${props[name].description} */\n` : "";
    return `${doc}${indent}  ${key(name)}${required.has(name) ? "" : "?"}: ${type(props[name])};`;
  });
  const extra = schema.additionalProperties;
  if (extra && extra !== false) lines.push(`${indent}  [key: string]: ${extra === true ? "unknown" : type(extra)};`);
  if (lines.length === 0) return "Record<string, unknown>";
  if (lines.length === 1 && !schema.properties) return `{ ${lines[0].trim()} }`;
  return `{\n${lines.join("\n")}\n${indent}}`;
}

const out = [
  "// Generated from docs/openapi.json by scripts/generate.mjs: do not edit by hand.",
  "// `make ts-client` regenerates it; CI fails when it is stale.",
  "",
];

const schemas = doc.components?.schemas ?? {};
for (const name of Object.keys(schemas).sort()) {
  const s = schemas[name];
  if (s.description) out.push(`/** ${s.description.split("\n")[0]} */`);
  if (s.type === "object" && !s.oneOf && !s.anyOf) out.push(`export interface ${ident(name)} ${objectType(s, "")}`);
  else out.push(`export type ${ident(name)} = ${type(s)};`);
  out.push("");
}

// Each operation: what it takes and what it answers (its 2xx JSON body).
const ops = [];
for (const path of Object.keys(doc.paths).sort()) {
  for (const method of Object.keys(doc.paths[path]).sort()) {
    const op = doc.paths[path][method];
    const params = op.parameters ?? [];
    const pathParams = params.filter((p) => p.in === "path");
    const query = params.filter((p) => p.in === "query");
    const body = op.requestBody?.content?.["application/json"]?.schema;
    const ok = Object.entries(op.responses ?? {}).find(([code]) => code.startsWith("2"));
    const answer = ok?.[1]?.content ? Object.values(ok[1].content)[0]?.schema : undefined;
    ops.push({ id: op.operationId, method: method.toUpperCase(), path, pathParams, query, body, answer, summary: op.summary });
  }
}
ops.sort((a, b) => a.id.localeCompare(b.id));

const field = (p) => `${key(p.name)}${p.required ? "" : "?"}: ${type(p.schema)}`;
out.push("/** Every operation of the service: what it takes (`args`) and what it answers. */");
out.push("export interface Operations {");
for (const o of ops) {
  const args = [];
  if (o.pathParams.length) args.push(`    path: { ${o.pathParams.map(field).join("; ")} };`);
  if (o.query.length) args.push(`    query${o.query.some((p) => p.required) ? "" : "?"}: { ${o.query.map(field).join("; ")} };`);
  if (o.body) args.push(`    body: ${type(o.body)};`);
  if (o.summary) out.push(`  /** ${o.summary}: ${o.method} ${o.path} */`);
  out.push(`  ${key(o.id)}: {`);
  out.push(`    args: {${args.length ? "\n" + args.join("\n") + "\n   " : ""} };`);
  out.push(`    answer: ${o.answer ? type(o.answer) : "null"};`);
  out.push("  };");
}
out.push("}");
out.push("");
out.push("/** Where each operation is served. */");
out.push("export const ROUTES: { readonly [K in keyof Operations]: { readonly method: string; readonly path: string } } = {");
for (const o of ops) out.push(`  ${key(o.id)}: { method: ${JSON.stringify(o.method)}, path: ${JSON.stringify(o.path)} },`);
out.push("};");
out.push("");

const text = out.join("\n");
if (flag === "--check") {
  let current = "";
  try {
    current = readFileSync(target, "utf8");
  } catch {}
  if (current !== text) {
    console.error(`${target} is stale: run \`make ts-client\` (it is generated from ${source})`);
    process.exit(1);
  }
} else {
  writeFileSync(target, text);
}
