// Tier kubernetes_manifests: every object in deploy/kubernetes is one a
// Kubernetes API server with strict field validation accepts (k8s_schema.mjs),
// the SandboxTemplate's pod template included; the files agree with each
// other and with the product (the handler, paths and labels they share, the
// agentd flags `agentd serve --help` lists, the rule file and grant a pod
// names); and a copy of each manifest with one field misspelled or of the
// wrong type is rejected at that field, so the checks above can fail. The
// init container's install script runs against a scratch node.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { execFileSync, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { isDeepStrictEqual } from "node:util";
import Ajv from "ajv";
import { parse as parseToml } from "smol-toml";
import { parse as parseYaml } from "yaml";
import { check, deployFiles, DEPLOY_DIR, finish, loadDeployment, SOURCE_DIR } from "./harness.mjs";
import { objectErrors, objectMetaErrors, podSpecErrors, schemaErrors } from "./k8s_schema.mjs";

const SANDBOX_API = "extensions.agents.x-k8s.io/v1beta1";

// The SandboxTemplate's pod template as the API server sees the pod it
// becomes (agent-sandbox copies it into the Sandbox's pod): core/v1
// PodTemplateSpec. The rest of the SandboxTemplate is judged against
// agent-sandbox's CRD in the kubernetes_sandbox_crd tier.
async function sandboxTemplateErrors(doc) {
  const errors = [];
  if (doc.apiVersion !== SANDBOX_API) errors.push(`/apiVersion: ${doc.apiVersion}, expected ${SANDBOX_API}`);
  errors.push(...objectMetaErrors(doc.metadata, "/metadata"));
  const pt = doc.spec?.podTemplate;
  if (!pt) return [...errors, "/spec/podTemplate: required"];
  for (const e of await schemaErrors("IoK8sApiCoreV1PodTemplateSpec", pt)) errors.push(`/spec/podTemplate${e}`);
  errors.push(...objectMetaErrors(pt.metadata, "/spec/podTemplate/metadata", { nameRequired: false }));
  if (pt.spec) errors.push(...podSpecErrors(pt.spec, "/spec/podTemplate/spec"));
  return errors;
}

async function errorsOf(doc) {
  return doc.kind === "SandboxTemplate" ? sandboxTemplateErrors(doc) : objectErrors(doc);
}

// The flags of a container's args ("--name=value" or "--name value"), by name.
function flags(args) {
  const out = new Map();
  for (let i = 0; i < args.length; i++) {
    const m = /^(--[a-z0-9-]+)(?:=(.*))?$/.exec(args[i]);
    if (!m) continue;
    if (m[2] !== undefined) out.set(m[1], m[2]);
    else if (i + 1 < args.length && !args[i + 1].startsWith("--")) out.set(m[1], args[++i]);
    else out.set(m[1], true);
  }
  return out;
}

// The host path behind a path inside a container (the hostPath volume
// mounted at it or at one of its parents), or null.
function hostPathOf(pod, container, path) {
  let best = null;
  for (const m of container.volumeMounts ?? []) {
    const under = path === m.mountPath || path.startsWith(m.mountPath.replace(/\/$/, "") + "/");
    if (!under || (best && best.mount.mountPath.length >= m.mountPath.length)) continue;
    const vol = (pod.volumes ?? []).find((v) => v.name === m.name);
    if (vol?.hostPath) best = { mount: m, host: vol.hostPath.path + path.slice(m.mountPath.length) };
  }
  return best;
}

function globMatches(glob, key) {
  const re = new RegExp("^" + glob.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$");
  return re.test(key);
}

// The init container's script run by sh against a scratch node: each path it
// names inside the container (/host/..., /usr/local/..., /config, /rules-extra)
// moved below a temporary directory, after checking it names no other
// absolute path. A good delegate installs the binaries, the rules (the
// ConfigMap's beside the image's) and oci.yaml, and a second run gives the
// same tree; a delegate missing on the node fails before anything changes.
function runInitScript(script, oci) {
  // "/host" also prefixes "$delegate"; "/usr" alone is the delegate check's
  // pattern and message, not a path the script opens.
  const prefixes = ["/host", "/usr/local/", "/config/", "/rules-extra/"];
  const stray = [...script.matchAll(/(?<![\w.$}])\/[a-z][\w./-]*/g)].map((m) => m[0])
    .filter((p) => !prefixes.some((x) => p.startsWith(x)) && !["/usr", "/usr/"].includes(p));
  if (!check(stray.length === 0, "the init script names only paths of its mounts and image", stray.join(" "))) return;
  const root = mkdtempSync(join(tmpdir(), "bulwark-init-"));
  try {
    const at = (p) => join(root, p);
    for (const d of ["host/opt/bulwark", "host/etc/bulwark", "host/usr/sbin", "usr/local/bin", "usr/local/share/bulwark",
      "config", "rules-extra"]) mkdirSync(at(d), { recursive: true });
    cpSync(join(SOURCE_DIR, "rules"), at("usr/local/share/bulwark/rules"), { recursive: true });
    for (const b of ["bulwark-oci", "bulwark-oci-launch"]) writeFileSync(at(`usr/local/bin/${b}`), `#!/bin/sh\n# ${b}\n`);
    writeFileSync(at(`host${oci.delegate}`), "#!/bin/sh\n", { mode: 0o755 });
    writeFileSync(at("rules-extra/site-tool.yaml"), "tool: site-tool\n");
    const moved = prefixes.reduce((t, p) => t.replaceAll(p, at(p.slice(1)) + (p.endsWith("/") ? "/" : "")), script);
    const run = (ociText) => {
      writeFileSync(at("config/oci.yaml"), ociText);
      return spawnSync("sh", ["-ec", moved], { encoding: "utf8" });
    };
    const tree = () => execFileSync("find", [at("host/opt"), at("host/etc"), "-printf", "%P %m\n"], { encoding: "utf8" })
      .split("\n").sort().join("\n");
    const ociText = readFileSync(join(DEPLOY_DIR, "oci.yaml"), "utf8");
    const first = run(ociText);
    const installed = first.status === 0 &&
      readFileSync(at("host/opt/bulwark/bin/bulwark-oci"), "utf8").includes("# bulwark-oci") &&
      statSync(at("host/opt/bulwark/bin/bulwark-oci-launch")).mode % 0o1000 === 0o755 &&
      existsSync(at("host/opt/bulwark/rules/sh.yaml")) && existsSync(at("host/opt/bulwark/rules/base")) &&
      existsSync(at("host/opt/bulwark/rules/site-tool.yaml")) &&
      readFileSync(at("host/etc/bulwark/oci.yaml"), "utf8") === ociText;
    check(installed, "the init script installs bulwark-oci, its launcher, the rules (and the ConfigMap's) and oci.yaml",
      `exit ${first.status}: ${first.stderr}`);
    const before = tree();
    const second = run(ociText);
    check(second.status === 0 && tree() === before, "a second run of the init script leaves the same files", second.stderr);
    const missing = run(ociText.replace(/^delegate: .*$/m, "delegate: /usr/bin/no-such-runtime"));
    check(missing.status !== 0 && /not an executable on this node/.test(missing.stderr) && tree() === before,
      "with a delegate missing on the node the init script fails before changing anything", missing.stderr);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function main() {
  // ---- every file of the folder is read, documented and of a known kind
  const readme = readFileSync(join(DEPLOY_DIR, "README.md"), "utf8");
  for (const f of deployFiles())
    if (f !== "README.md") check(readme.includes(`\`${f}\``), `deploy/kubernetes/README.md describes ${f}`);

  const { objects, one } = loadDeployment();
  const known = new Set(["Namespace", "ServiceAccount", "ConfigMap", "DaemonSet", "RuntimeClass", "SandboxTemplate"]);
  for (const { file, doc } of objects) {
    const what = `${file}: ${doc.kind} ${doc.metadata?.name}`;
    if (!check(known.has(doc.kind), `${what} is a kind this tier validates`)) continue;
    const errors = await errorsOf(doc);
    check(errors.length === 0, `${what} is valid against the Kubernetes API schema`, errors.join("\n"));
  }

  const ns = one("Namespace");
  const sa = one("ServiceAccount");
  const cm = one("ConfigMap");
  const ds = one("DaemonSet");
  const rc = one("RuntimeClass");
  const st = one("SandboxTemplate");
  const pod = ds.spec.template.spec;
  const agentd = pod.containers.find((c) => c.name === "agentd");
  const init = (pod.initContainers ?? []).find((c) => c.name === "install-runtime");
  check(!!agentd && !!init, "the DaemonSet has the agentd container and the install-runtime init container");
  const args = flags(agentd?.args ?? []);

  // ---- the namespace and what lives in it
  for (const o of [sa, cm, ds]) check(o.metadata.namespace === ns.metadata.name, `${o.kind} ${o.metadata.name} is in ${ns.metadata.name}`);
  check(pod.serviceAccountName === sa.metadata.name, "the DaemonSet runs as its ServiceAccount");
  check(ns.metadata.labels?.["pod-security.kubernetes.io/enforce"] === "privileged",
    "the namespace's Pod Security level admits the privileged agentd pod");

  // ---- the runtime's configuration: the ConfigMap is the example file
  const ociExample = parseYaml(readFileSync(join(DEPLOY_DIR, "oci.yaml"), "utf8"));
  const ociConfig = parseYaml(cm.data?.["oci.yaml"] ?? "");
  check(isDeepStrictEqual(ociConfig, ociExample), "the bulwark-oci ConfigMap holds the settings of oci.yaml",
    JSON.stringify({ configmap: ociConfig, file: ociExample }));
  const ociKeys = ["delegate", "rules_dir", "agentd_socket", "unannotated", "state_root"];
  check(isDeepStrictEqual(Object.keys(ociExample).sort(), [...ociKeys].sort()), "oci.yaml sets exactly bulwark-oci's keys",
    Object.keys(ociExample).join(", "));
  check(["run", "refuse"].includes(ociExample.unannotated), "oci.yaml: unannotated is run or refuse", ociExample.unannotated);
  for (const k of ["delegate", "rules_dir", "agentd_socket", "state_root"])
    check(typeof ociExample[k] === "string" && posix.isAbsolute(ociExample[k]), `oci.yaml: ${k} is an absolute path`, ociExample[k]);

  // ---- the containerd handler is the RuntimeClass's, and runs what the
  // init container installs
  const toml = parseToml(readFileSync(join(DEPLOY_DIR, "containerd-bulwark.toml"), "utf8"));
  const runtimes = toml.plugins?.["io.containerd.grpc.v1.cri"]?.containerd?.runtimes ?? {};
  const handler = runtimes[rc.handler];
  check(!!handler, `containerd-bulwark.toml defines the runtime named by the RuntimeClass's handler (${rc.handler})`,
    Object.keys(runtimes).join(", "));
  check(st.spec.podTemplate.spec.runtimeClassName === rc.metadata.name, "the SandboxTemplate's pods name the RuntimeClass");
  const optMount = init?.volumeMounts?.find((m) => m.name === "opt-bulwark");
  const optHost = pod.volumes.find((v) => v.name === "opt-bulwark")?.hostPath?.path;
  const binary = handler?.options?.BinaryName;
  check(binary === `${optHost}/bin/bulwark-oci`, "BinaryName is where the init container installs bulwark-oci",
    `${binary} vs ${optHost}/bin/bulwark-oci`);
  const script = (init?.args ?? []).join("\n");
  check(script.includes(`dest=${optMount?.mountPath}`) && /for b in bulwark-oci bulwark-oci-launch; do/.test(script) &&
    script.includes('"$dest/bin/$b"'), "the init container installs bulwark-oci and its launcher into that directory");
  check(ociExample.rules_dir === `${optHost}/rules` && script.includes('mv "$dest/.rules.new" "$dest/rules"'),
    "oci.yaml's rules_dir is where the init container installs the rules", ociExample.rules_dir);
  const etc = hostPathOf(pod, init ?? {}, "/host/etc/bulwark/oci.yaml");
  check(etc?.host === "/etc/bulwark/oci.yaml" && script.includes("mv -f /host/etc/bulwark/.oci.yaml.new /host/etc/bulwark/oci.yaml"),
    "the init container writes the node's /etc/bulwark/oci.yaml", etc?.host);
  check(hostPathOf(pod, init ?? {}, "/host" + ociExample.delegate)?.host === ociExample.delegate,
    "the init container sees the node's delegate runtime where it checks it", ociExample.delegate);

  runInitScript(script, ociExample);

  // ---- agentd's flags exist, and agree with the runtime and the node
  const agentdBinary = process.env.AGENTD_BINARY;
  let help = "";
  try {
    help = execFileSync(agentdBinary, ["serve", "--help"], { encoding: "utf8" });
  } catch (e) {
    help = "";
  }
  check(help.includes("--bpf-cgroup-parent"), `agentd serve --help runs (${agentdBinary})`);
  for (const name of args.keys())
    check(new RegExp(`^\\s+${name}\\b`, "m").test(help), `agentd serve has the flag ${name}`);
  check(agentd?.args?.[0] === "serve", "the agentd container runs `agentd serve`");
  check(args.get("--socket") === ociExample.agentd_socket, "agentd listens on oci.yaml's agentd_socket", args.get("--socket"));
  check(hostPathOf(pod, agentd, args.get("--socket"))?.host === ociExample.agentd_socket,
    "the socket is on the host, where bulwark-oci connects");
  check(args.get("--rules") === ociExample.rules_dir && hostPathOf(pod, agentd, args.get("--rules"))?.host === ociExample.rules_dir,
    "agentd reads the rule files bulwark-oci reads, at the same path");
  check(hostPathOf(pod, agentd, args.get("--state-dir"))?.host === args.get("--state-dir"),
    "the audit store is on the node's disk", args.get("--state-dir"));
  const parent = args.get("--bpf-cgroup-parent");
  // Below the parent, a cgroup not bound to a policy is denied everything
  // (bpf/helpers/sandbox.bpf.h): it must hold Bulwark containers only, not
  // the pods' tree (every other pod, and agentd's own) nor the whole host.
  // bulwark-oci makes the containers' cgroups there by path, so the handler
  // must not ask runc for systemd scopes.
  check(handler?.options?.SystemdCgroup === false, "the handler leaves the container's cgroup to bulwark-oci (SystemdCgroup = false)");
  check(parent === "/sys/fs/cgroup/bulwark", "the BPF cgroup parent is Bulwark's own cgroup", parent);
  check(typeof parent === "string" && !/kubepods/.test(parent) && parent.split("/").length > 4,
    "the BPF cgroup parent is neither the pods' tree nor the cgroup root", parent);
  check(hostPathOf(pod, agentd, parent)?.host === parent, "the cgroup parent is the host's cgroup tree");
  const pins = hostPathOf(pod, agentd, args.get("--bpf-pin-root"));
  check(pins?.host === args.get("--bpf-pin-root") && pins.mount.mountPropagation === "Bidirectional",
    "the pin root is in the host's bpffs, mounted Bidirectional", JSON.stringify(pins));
  check(hostPathOf(pod, agentd, "/sys/kernel/security/lsm")?.host === "/sys/kernel/security/lsm",
    "agentd sees the host's securityfs (is the BPF LSM enabled)");
  check(args.get("--http") === "off", "agentd opens no TCP listener in the host's network namespace");
  // The image holds `cmake --install` under /usr/local; deploy/systemd installs the compiled bundle
  // as share/bulwark/agentd-self.bundle.json.
  check(args.get("--self-seccomp") === "/usr/local/share/bulwark/agentd-self.bundle.json" &&
    /install\(FILES \$\{AGENTD_SELF_BUNDLE\} DESTINATION share\/bulwark\)/.test(
      readFileSync(join(SOURCE_DIR, "deploy", "systemd", "CMakeLists.txt"), "utf8")),
    "agentd runs under its own seccomp filter, the bundle the image installs", args.get("--self-seccomp"));
  check(pod.hostPID === true && pod.hostNetwork === true,
    "agentd shares the host's PID and network namespaces (kernel audit: AUDIT_SET and the multicast records)");
  check(agentd?.securityContext?.privileged === true, "agentd is privileged (host cgroup namespace, Bidirectional bpffs mount)");

  // ---- scheduling: agentd runs wherever the RuntimeClass sends pods
  for (const [k, v] of Object.entries(rc.scheduling?.nodeSelector ?? {}))
    check(pod.nodeSelector?.[k] === v, `the DaemonSet selects the RuntimeClass's nodes (${k}=${v})`);
  for (const t of rc.scheduling?.tolerations ?? [])
    check((pod.tolerations ?? []).some((u) => u.key === t.key && u.effect === t.effect),
      `the DaemonSet tolerates the RuntimeClass's taint ${t.key}:${t.effect}`);

  // ---- what a pod asks for: annotations containerd passes, a rule file
  // that ships, a grant the API's schema accepts, a mounted work directory
  const ann = st.spec.podTemplate.metadata?.annotations ?? {};
  for (const k of Object.keys(ann).filter((k) => k.startsWith("org.bulwark.")))
    check((handler?.pod_annotations ?? []).some((g) => globMatches(g, k)), `containerd passes the pod annotation ${k}`);
  const tool = ann["org.bulwark.tool"];
  check(typeof tool === "string" && existsSync(join(SOURCE_DIR, "rules", `${tool}.yaml`)),
    `org.bulwark.tool names a shipped rule file (rules/${tool}.yaml)`);
  const openapi = JSON.parse(readFileSync(join(SOURCE_DIR, "agentd", "api", "openapi.json"), "utf8"));
  const ajv = new Ajv({ allErrors: true, strict: false });
  const grantValid = ajv.compile(openapi.components.schemas.Grant);
  let grant = null;
  try {
    grant = JSON.parse(ann["org.bulwark.grant"]);
  } catch (e) {
    check(false, "org.bulwark.grant is JSON", e.message);
  }
  if (grant !== null)
    check(grantValid(grant), "org.bulwark.grant is a Grant of agentd's API (agentd/api/openapi.json)", ajv.errorsText(grantValid.errors));
  const wd = ann["org.bulwark.workdir"];
  check(st.spec.podTemplate.spec.containers.every((c) => (c.volumeMounts ?? []).some((m) => m.mountPath === wd)),
    `org.bulwark.workdir (${wd}) is a volume mounted in every container`);

  // ---- negative cases: one field wrong in a copy, rejected at that field
  const negatives = [
    ["DaemonSet", "hostPID misspelled hostPid", (d) => {
      delete d.spec.template.spec.hostPID;
      d.spec.template.spec.hostPid = true;
    }, "/spec/template/spec/hostPid"],
    ["DaemonSet", "privileged as the string \"true\"", (d) => {
      d.spec.template.spec.containers[0].securityContext.privileged = "true";
    }, "/spec/template/spec/containers/0/securityContext/privileged"],
    ["DaemonSet", "a hostPath type outside its enum", (d) => {
      d.spec.template.spec.volumes[0].hostPath.type = "directory";
    }, "/spec/template/spec/volumes/0/hostPath/type"],
    ["DaemonSet", "mountPropagation without privileged", (d) => {
      d.spec.template.spec.containers[0].securityContext.privileged = false;
    }, "/spec/template/spec/containers/0/volumeMounts/0"],
    ["DaemonSet", "a volumeMount naming no volume", (d) => {
      d.spec.template.spec.containers[0].volumeMounts[0].name = "bpf-fs";
    }, "/spec/template/spec/containers/0/volumeMounts/0"],
    ["RuntimeClass", "handler misspelled handlr", (d) => {
      d.handlr = d.handler;
      delete d.handler;
    }, "/handlr"],
    ["RuntimeClass", "a nodeSelector value that is a number", (d) => {
      d.scheduling.nodeSelector["bulwark.dev/runtime"] = 1;
    }, "/scheduling/nodeSelector/bulwark.dev~1runtime"],
    ["Namespace", "a label value with a space", (d) => {
      d.metadata.labels["pod-security.kubernetes.io/enforce"] = "privileged please";
    }, "/metadata/labels/pod-security.kubernetes.io~1enforce"],
    ["ServiceAccount", "automountServiceAccountToken as a string", (d) => {
      d.automountServiceAccountToken = "false";
    }, "/automountServiceAccountToken"],
    ["ConfigMap", "data misspelled date", (d) => {
      d.date = d.data;
      delete d.data;
    }, "/date"],
    ["SandboxTemplate", "runtimeClassName misspelled runtimeClassname in the pod template", (d) => {
      d.spec.podTemplate.spec.runtimeClassname = d.spec.podTemplate.spec.runtimeClassName;
      delete d.spec.podTemplate.spec.runtimeClassName;
    }, "/spec/podTemplate/spec/runtimeClassname"],
    ["SandboxTemplate", "a container's stdin as a string", (d) => {
      d.spec.podTemplate.spec.containers[0].stdin = "yes";
    }, "/spec/podTemplate/spec/containers/0/stdin"],
  ];
  for (const [kind, what, mutate, pointer] of negatives) {
    const copy = structuredClone(one(kind));
    mutate(copy);
    const errors = await errorsOf(copy);
    check(errors.some((e) => e.startsWith(pointer + ":") || e.startsWith(pointer + " ")),
      `${kind} with ${what} is rejected at ${pointer}`, errors.join("\n") || "accepted");
  }
}

main()
  .catch((e) => check(false, "the tier ran to its end", e.stack))
  .finally(() => (process.exitCode = finish()));
