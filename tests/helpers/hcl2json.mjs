// SPDX-License-Identifier: LGPL-2.1-or-later
// Parses an HCL2 file (a Nomad job) offline, for tests/integration/fleet-manifests.py:
//
//   node hcl2json.mjs --modules DIR FILE
//
// with the npm package @cdktf/hcl2json 0.21.0 that tests/setup.sh installs into DIR: HashiCorp's
// own HCL2 parser (hashicorp/hcl, through tmccombs/hcl2json) compiled to WebAssembly, shipped in
// the package, so nothing is fetched at run time. It checks the syntax only: Nomad's job schema
// (which blocks and attributes a job may have) is not known to it; the test checks the structure
// it needs. Prints the file as JSON (blocks as arrays of objects; expressions that are not
// literals as "${...}" strings, heredocs as their text) and exits 0, or prints the parser's error
// on stderr and exits 1; 2 when it could not run (the message names the missing package).

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

function fail(code, msg) {
        process.stderr.write(`hcl2json.mjs: ${msg}\n`);
        process.exit(code);
}

const args = process.argv.slice(2);
if (args[0] !== "--modules" || args.length !== 3)
        fail(2, "usage: node hcl2json.mjs --modules NODE_MODULES_DIR FILE");
const modules = path.resolve(args[1]);
const file = args[2];
const version = "0.21.0";

let found;
try {
        found = JSON.parse(fs.readFileSync(path.join(modules, "@cdktf", "hcl2json", "package.json"), "utf8")).version;
} catch {
        fail(2, `the npm package @cdktf/hcl2json ${version} is not in ${modules}: tests/setup.sh installs it ` +
                `(npm install --prefix ${path.dirname(modules)} @cdktf/hcl2json@${version})`);
}
if (found !== version)
        fail(2, `the npm package @cdktf/hcl2json in ${modules} is version ${found}, the tests expect ${version}`);

const { parse } = createRequire(path.join(modules, "@cdktf", "hcl2json", "package.json"))("@cdktf/hcl2json");
let text;
try {
        text = fs.readFileSync(file, "utf8");
} catch (e) {
        fail(1, `cannot read ${file}: ${e.message}`);
}
try {
        const json = await parse(path.basename(file), text);
        process.stdout.write(JSON.stringify(json) + "\n");
} catch (e) {
        fail(1, `${file}: ${e?.message ?? e}`);
}
