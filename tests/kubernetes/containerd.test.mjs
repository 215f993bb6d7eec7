// Tier kubernetes_containerd: deploy/kubernetes/containerd-bulwark.toml read
// by containerd's own config parser (`containerd config dump`, Debian's
// containerd 1.6), appended to the configuration containerd writes for a node
// (`containerd config default`), as docs/kubernetes.md says to install it.
// The dump, which is what containerd would run with, must show the bulwark
// runtime with its shim, binary, cgroup driver and annotation filters, and
// the node's runc runtime untouched. Negative cases: a key of the wrong type
// makes containerd refuse the file; a misspelled key or an ill-typed option
// containerd accepts silently, so the dump's values are what is checked.
// And the reason the doc says "append", not "imports": containerd 1.6
// replaces the CRI plugin's whole table with an imported file's.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse as parseToml } from "smol-toml";
import { check, DEPLOY_DIR, finish, skip } from "./harness.mjs";

const CRI = "io.containerd.grpc.v1.cri";
const EXPECTED = {
  runtime_type: "io.containerd.runc.v2",
  pod_annotations: ["org.bulwark.*"],
  container_annotations: ["org.bulwark.*"],
  BinaryName: "/opt/bulwark/bin/bulwark-oci",
  SystemdCgroup: false,
};

function containerd(args) {
  return spawnSync(process.env.CONTAINERD_BINARY || "containerd", args, { encoding: "utf8", timeout: 60000 });
}

const work = mkdtempSync(join(tmpdir(), "bulwark-containerd-"));
process.on("exit", () => rmSync(work, { recursive: true, force: true }));

// A node's config.toml: containerd's own default, with its root and state in
// the test's directory (config dump creates neither; this keeps it so).
function nodeConfig(extraTop = "") {
  const def = containerd(["config", "default"]);
  if (def.status !== 0) throw new Error(`containerd config default: ${def.stderr}`);
  let text = def.stdout
    .replace(/^root = .*$/m, `root = "${work}/root"`)
    .replace(/^state = .*$/m, `state = "${work}/state"`);
  if (extraTop) text = text.replace(/^imports = .*$/m, extraTop);
  return text;
}

let n = 0;
// containerd's dump of a config file with `text`: {status, stderr, config}.
function dump(text) {
  const file = join(work, `config-${++n}.toml`);
  writeFileSync(file, text);
  const r = containerd(["--config", file, "config", "dump"]);
  let config = null;
  if (r.status === 0) config = parseToml(r.stdout);
  return { status: r.status, stderr: r.stderr, config };
}

// What is wrong with the bulwark runtime in a dumped config ([] if nothing).
function handlerProblems(config) {
  const rt = config?.plugins?.[CRI]?.containerd?.runtimes?.bulwark;
  if (!rt) return ["no runtime named bulwark in the CRI plugin"];
  const got = {
    runtime_type: rt.runtime_type,
    pod_annotations: rt.pod_annotations,
    container_annotations: rt.container_annotations,
    BinaryName: rt.options?.BinaryName,
    SystemdCgroup: rt.options?.SystemdCgroup,
  };
  return Object.keys(EXPECTED)
    .filter((k) => !isDeepStrictEqual(got[k], EXPECTED[k]))
    .map((k) => `${k} = ${JSON.stringify(got[k])}, expected ${JSON.stringify(EXPECTED[k])}`);
}

function main() {
  const version = containerd(["--version"]);
  if (version.error || version.status !== 0)
    skip(`containerd is needed to parse the config (scripts/install-deps.sh installs Debian's): ${version.error?.message ?? version.stderr}`);
  console.log(`  ${version.stdout.trim()}`);

  const snippet = readFileSync(join(DEPLOY_DIR, "containerd-bulwark.toml"), "utf8");
  const alone = parseToml(snippet);
  check(isDeepStrictEqual(Object.keys(alone), ["plugins"]),
    "the snippet holds only plugin tables (appended, it sets nothing else of the node's file)", Object.keys(alone).join(", "));

  const base = nodeConfig();
  const plain = dump(base);
  check(plain.status === 0, "containerd parses its own default configuration", plain.stderr);
  const runc = plain.config?.plugins?.[CRI]?.containerd?.runtimes?.runc;
  check(!!runc, "the default configuration has the runc runtime");

  const appended = dump(base + "\n" + snippet);
  check(appended.status === 0, "containerd parses the node's configuration with the snippet appended", appended.stderr);
  const problems = handlerProblems(appended.config);
  check(problems.length === 0, "the dump has the bulwark runtime: runc shim, BinaryName, SystemdCgroup, org.bulwark.* pod and container annotations",
    problems.join("\n"));
  const cri = appended.config?.plugins?.[CRI];
  check(isDeepStrictEqual(cri?.containerd?.runtimes?.runc, runc) && cri?.containerd?.default_runtime_name === "runc",
    "the node's runc runtime and default runtime are untouched");

  // Why not a drop-in: imported, the snippet's CRI table replaces the node's.
  const imported = join(work, "bulwark-import.toml");
  writeFileSync(imported, snippet);
  const viaImport = dump(nodeConfig(`imports = ["${imported}"]`));
  check(viaImport.status === 0 && handlerProblems(viaImport.config).length === 0 &&
    !viaImport.config?.plugins?.[CRI]?.containerd?.runtimes?.runc,
    "imported instead, the snippet's CRI table replaces the node's: the runc runtime is gone (docs/kubernetes.md says append)",
    viaImport.stderr);

  // ---- negative cases
  const mutate = (from, to) => {
    const text = snippet.replace(from, to);
    if (text === snippet) throw new Error(`the snippet has no ${from}`);
    return base + "\n" + text;
  };
  const stringList = dump(mutate('pod_annotations = ["org.bulwark.*"]', 'pod_annotations = "org.bulwark.*"'));
  check(stringList.status !== 0 && /Can't convert/.test(stringList.stderr),
    "pod_annotations as a string instead of a list: containerd refuses the configuration",
    `exit ${stringList.status}: ${stringList.stderr}`);
  const misspelled = dump(mutate("  pod_annotations =", "  pod_anotations ="));
  check(misspelled.status === 0 && handlerProblems(misspelled.config).some((p) => p.startsWith("pod_annotations = []")),
    "pod_annotations misspelled: containerd ignores the key, and the dump check finds the annotations missing",
    JSON.stringify(handlerProblems(misspelled.config)));
  const numberBinary = dump(mutate('BinaryName = "/opt/bulwark/bin/bulwark-oci"', "BinaryName = 5"));
  check(numberBinary.status === 0 && handlerProblems(numberBinary.config).some((p) => p.startsWith("BinaryName = 5")),
    "BinaryName as a number: the runc options are not checked by containerd's parser, and the dump check rejects it",
    JSON.stringify(handlerProblems(numberBinary.config)));
}

try {
  main();
} catch (e) {
  check(false, "the tier ran to its end", e.stack);
}
process.exitCode = finish();
