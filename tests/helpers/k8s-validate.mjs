// SPDX-License-Identifier: LGPL-2.1-or-later
// Validates Kubernetes manifests offline against the API's schemas, for
// tests/integration/fleet-manifests.py:
//
//   node k8s-validate.mjs --modules DIR FILE...
//
// DIR is the node_modules directory where tests/setup.sh installed the npm packages
// kubernetes-models 5.1.0 (the Kubernetes OpenAPI schemas compiled to ajv validators: PodSpec
// knows hostUsers, SecurityContext knows procMount) and yaml 2.9.1. Each FILE is read as a
// stream of YAML documents with the YAML 1.1 schema, as Kubernetes reads them (0555 is octal),
// and every document:
//   - must have apiVersion and kind for which kubernetes-models has a model class (a kind it
//     does not know is an error, not a pass);
//   - is validated by that class's validate() (types, enums, required fields, formats such as
//     resource quantities);
//   - is checked strictly, as kubeconform -strict does: a field the schema does not name (a
//     misspelled hostUser, say) is an error. The compiled validators accept unknown fields (the
//     Kubernetes schemas do not forbid them: the API server drops them with a warning), so the
//     document is validated once more through a proxy that records each property the validator
//     reads: any field it never read is one the schema does not have.
//
// Prints one JSON object: {"files": [{"file", "error", "documents": [{"index", "apiVersion",
// "kind", "name", "doc", "errors": [...], "unknownFields": [...]}]}]}; "error" is a parse error
// of the file (then "documents" is empty). Exit status 0 when it could look at every file (the
// caller judges the results), 2 when it could not run (a missing package: the message names it).

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

function cannot(msg) {
        process.stderr.write(`k8s-validate.mjs: ${msg}\n`);
        process.exit(2);
}

function usage(msg) {
        cannot(`${msg}\nusage: node k8s-validate.mjs --modules NODE_MODULES_DIR FILE...`);
}

const args = process.argv.slice(2);
if (args[0] !== "--modules" || args.length < 3)
        usage("--modules DIR and at least one file are required");
const modules = path.resolve(args[1]);
const files = args.slice(2);

const want = { "kubernetes-models": "5.1.0", yaml: "2.9.1" };
for (const [name, version] of Object.entries(want)) {
        let found;
        try {
                found = JSON.parse(fs.readFileSync(path.join(modules, name, "package.json"), "utf8")).version;
        } catch {
                cannot(`the npm package ${name} ${version} is not in ${modules}: tests/setup.sh installs it ` +
                      `(npm install --prefix ${path.dirname(modules)} ${name}@${version})`);
        }
        if (found !== version)
                cannot(`the npm package ${name} in ${modules} is version ${found}, the tests expect ${version} (tests/setup.sh installs it)`);
}

const YAML = createRequire(path.join(modules, "yaml", "package.json"))("yaml");

// apiVersion "apps/v1" -> kubernetes-models/apps/v1/index.js, "v1" -> kubernetes-models/v1/index.js
const groupCache = new Map();
async function modelClass(apiVersion, kind) {
        if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion))
                return [null, `apiVersion ${JSON.stringify(apiVersion)} is not a Kubernetes API version`];
        if (typeof kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(kind))
                return [null, `kind ${JSON.stringify(kind)} is not a Kubernetes kind`];
        const index = path.join(modules, "kubernetes-models", ...apiVersion.split("/"), "index.js");
        if (!groupCache.has(index))
                groupCache.set(index, fs.existsSync(index) ? await import(pathToFileURL(index).href) : null);
        const group = groupCache.get(index);
        if (!group)
                return [null, `kubernetes-models has no API version ${apiVersion}`];
        const cls = group[kind];
        if (typeof cls !== "function" || typeof cls.prototype.validate !== "function")
                return [null, `kubernetes-models has no kind ${kind} in ${apiVersion}`];
        return [cls, null];
}

// A view of @obj that adds to @seen the path of each own property read through it.
function tracked(obj, where, seen) {
        if (obj === null || typeof obj !== "object")
                return obj;
        return new Proxy(obj, {
                get(target, key, receiver) {
                        const value = Reflect.get(target, key, receiver);
                        if (typeof key !== "string" || !Object.prototype.hasOwnProperty.call(target, key))
                                return value;
                        const p = `${where}/${key}`;
                        seen.add(p);
                        return tracked(value, p, seen);
                },
        });
}

// The paths of @obj's fields (not array elements) that are not in @seen.
function unread(obj, where, seen, out) {
        if (obj === null || typeof obj !== "object")
                return out;
        for (const key of Object.keys(obj)) {
                const p = `${where}/${key}`;
                if (!Array.isArray(obj) && !seen.has(p))
                        out.push(p);
                else
                        unread(obj[key], p, seen, out);
        }
        return out;
}

function errorList(e) {
        if (Array.isArray(e?.errors) && e.errors.length)
                return e.errors.map((x) => `${x.instancePath || "/"} ${x.message}`);
        return [String(e?.message ?? e)];
}

const result = { files: [] };
for (const file of files) {
        const entry = { file, error: null, documents: [] };
        result.files.push(entry);
        let text;
        try {
                text = fs.readFileSync(file, "utf8");
        } catch (e) {
                entry.error = `cannot read: ${e.message}`;
                continue;
        }
        const docs = YAML.parseAllDocuments(text, { version: "1.1", uniqueKeys: true });
        const broken = (Array.isArray(docs) ? docs : [docs]).flatMap((d) => d.errors ?? []);
        if (!Array.isArray(docs) || broken.length) {
                entry.error = broken.map((e) => e.message).join("; ") || "not a YAML stream";
                continue;
        }
        let index = 0;
        for (const d of docs) {
                const doc = d.toJS({ maxAliasCount: 0 });
                if (doc === null || doc === undefined)
                        continue;               // an empty document (a trailing ---)
                const out = { index: index++, apiVersion: doc?.apiVersion, kind: doc?.kind,
                              name: doc?.metadata?.name, doc, errors: [], unknownFields: [] };
                entry.documents.push(out);
                if (typeof doc !== "object" || Array.isArray(doc)) {
                        out.errors.push("the document is not a mapping");
                        continue;
                }
                const [cls, why] = await modelClass(doc.apiVersion, doc.kind);
                if (!cls) {
                        out.errors.push(why);
                        continue;
                }
                try {
                        new cls(doc).validate();
                } catch (e) {
                        out.errors.push(...errorList(e));
                }
                const seen = new Set(["/apiVersion", "/kind"]);
                try {
                        cls.prototype.validate.call(tracked(doc, "", seen));
                } catch {
                        // reported above
                }
                out.unknownFields = unread(doc, "", seen, []);
        }
}
process.stdout.write(JSON.stringify(result) + "\n");
