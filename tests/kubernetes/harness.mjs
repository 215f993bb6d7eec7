// Shared by the kubernetes tiers: where the manifests are, how they are read,
// and a check/report harness (every check runs; the exit code says whether
// one failed; 77 with one line when a requirement is missing).
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

export const SOURCE_DIR = process.env.BULWARK_SOURCE_DIR;
if (!SOURCE_DIR) {
  console.log("FAIL: BULWARK_SOURCE_DIR is not set (CTest sets it to the repository)");
  process.exit(1);
}
export const DEPLOY_DIR = join(SOURCE_DIR, "deploy", "kubernetes");

export function skip(reason) {
  console.log(`SKIP: ${reason}`);
  process.exit(77);
}

let passed = 0;
const failures = [];
export function check(ok, what, detail = "") {
  if (ok) {
    passed++;
    console.log(`  ok   ${what}`);
  } else {
    failures.push(what);
    const more = detail ? "\n       " + String(detail).split("\n").join("\n       ") : "";
    console.log(`  FAIL ${what}${more}`);
  }
  return ok;
}

export function finish() {
  console.log(`\n${passed} passed, ${failures.length} failed`);
  for (const f of failures) console.log(`failed: ${f}`);
  return failures.length ? 1 : 0;
}

// Every YAML document of a file, parsed strictly (a duplicate key or a
// syntax error is a failure, as it is for kubectl).
export function readYamlDocs(path) {
  const docs = parseAllDocuments(readFileSync(path, "utf8"), { uniqueKeys: true, prettyErrors: true });
  const out = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`${path}: ${d.errors.map((e) => e.message).join("; ")}`);
    const v = d.toJS({ maxAliasCount: 0 });
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

export function deployFiles() {
  return readdirSync(DEPLOY_DIR).sort();
}

// The deployment's objects by kind (each kind's list in file order), and the
// file each came from.
export function loadDeployment() {
  const objects = [];
  for (const f of deployFiles()) {
    if (!f.endsWith(".yaml") || f === "oci.yaml") continue;
    for (const doc of readYamlDocs(join(DEPLOY_DIR, f))) objects.push({ file: f, doc });
  }
  const one = (kind) => {
    const all = objects.filter((o) => o.doc.kind === kind);
    if (all.length !== 1) throw new Error(`deploy/kubernetes: ${all.length} ${kind} objects, expected one`);
    return all[0].doc;
  };
  return { objects, one };
}
