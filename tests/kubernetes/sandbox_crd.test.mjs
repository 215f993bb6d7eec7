// Tier kubernetes_sandbox_crd: deploy/kubernetes/sandbox-template.yaml
// against kubernetes-sigs/agent-sandbox's own CRD, as an API server with the
// CRD installed would judge it (crd_schema.mjs): the version it names is
// served and not deprecated, every field is one the schema defines, with its
// type, enum and list semantics, and the metadata is a valid ObjectMeta.
// Negative cases: copies with one field wrong are rejected at that field.
//
// The CRD is agent-sandbox v0.5.6's
// k8s/crds/extensions.agents.x-k8s.io_sandboxtemplates.yaml (tag v0.5.6,
// commit 211b7579cabed9460c1a692eb687084ff4c5879d; Apache-2.0), read from
// BULWARK_AGENT_SANDBOX_CRD (CMake: -DBULWARK_AGENT_SANDBOX_CRD=<file>, by
// default shared/agent-sandbox/v0.5.6/ beside the repository). It is not
// vendored here: upstream files are kept outside this repository. Its
// SHA-256 is pinned below, so the tier validates against exactly that
// schema; another version is a failure until the pin (and this comment)
// move to it.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { check, DEPLOY_DIR, finish, readYamlDocs, skip } from "./harness.mjs";
import { compileCrdVersion } from "./crd_schema.mjs";
import { objectMetaErrors, schemaErrors } from "./k8s_schema.mjs";

const CRD_SHA256 = "af22468bd579fd6779fbe93cf6516dec7b08606d4fb225ed910890b27d0d6819";
const CRD_NAME = "sandboxtemplates.extensions.agents.x-k8s.io";

async function main() {
  const crdFile = process.env.BULWARK_AGENT_SANDBOX_CRD;
  if (!crdFile || !existsSync(crdFile))
    skip(`agent-sandbox v0.5.6's SandboxTemplate CRD is needed (BULWARK_AGENT_SANDBOX_CRD=${crdFile ?? ""}: no such file)`);
  const bytes = readFileSync(crdFile);
  const sha = createHash("sha256").update(bytes).digest("hex");
  if (!check(sha === CRD_SHA256, `the CRD is agent-sandbox v0.5.6's (${crdFile})`, `sha256 ${sha}`)) return;
  const [crd] = readYamlDocs(crdFile);
  check(crd.kind === "CustomResourceDefinition" && crd.metadata.name === CRD_NAME, `the file is the CRD ${CRD_NAME}`);

  const [template] = readYamlDocs(join(DEPLOY_DIR, "sandbox-template.yaml"));
  const [group, version] = template.apiVersion.split("/");
  check(group === crd.spec.group && template.kind === crd.spec.names.kind,
    `sandbox-template.yaml is a ${crd.spec.names.kind} of ${crd.spec.group}`, `${template.apiVersion} ${template.kind}`);
  const v = crd.spec.versions.find((x) => x.name === version);
  check(v?.served === true, `the CRD serves ${version}`, crd.spec.versions.map((x) => x.name).join(", "));
  check(v && v.deprecated !== true, `${version} is not deprecated`, v?.deprecationWarning);
  check(v?.storage === true, `${version} is the stored version (no conversion on the way in)`);
  if (!v) return;

  const validate = compileCrdVersion(v.schema.openAPIV3Schema);
  const errorsOf = async (doc) => {
    const out = [];
    if (!validate(doc))
      for (const e of validate.errors) out.push(`${e.instancePath || "/"}: ${e.message} ${JSON.stringify(e.params)}`);
    for (const e of await schemaErrors("IoK8sApimachineryPkgApisMetaV1ObjectMeta", doc.metadata ?? {})) out.push(`/metadata${e}`);
    out.push(...objectMetaErrors(doc.metadata, "/metadata"));
    return out;
  };
  const errors = await errorsOf(template);
  check(errors.length === 0, "sandbox-template.yaml is valid against the CRD's schema", errors.join("\n"));

  const negatives = [
    ["podTemplate misspelled podTemplat", (d) => {
      d.spec.podTemplat = d.spec.podTemplate;
      delete d.spec.podTemplate;
    }, "/spec"],
    ["service as a string", (d) => {
      d.spec.service = "yes";
    }, "/spec/service"],
    ["networkPolicyManagement outside its enum", (d) => {
      d.spec.networkPolicyManagement = "Manual";
    }, "/spec/networkPolicyManagement"],
    ["a namespace in the pod template's metadata (labels and annotations only)", (d) => {
      d.spec.podTemplate.metadata.namespace = "agents";
    }, "/spec/podTemplate/metadata"],
    ["two containers of one name (a list-type map keyed by name)", (d) => {
      d.spec.podTemplate.spec.containers.push(structuredClone(d.spec.podTemplate.spec.containers[0]));
    }, "/spec/podTemplate/spec/containers"],
    ["runtimeClassName as a number", (d) => {
      d.spec.podTemplate.spec.runtimeClassName = 1;
    }, "/spec/podTemplate/spec/runtimeClassName"],
    ["a metadata field ObjectMeta does not have", (d) => {
      d.metadata.label = { a: "b" };
    }, "/metadata/label"],
  ];
  for (const [what, mutate, pointer] of negatives) {
    const copy = structuredClone(template);
    mutate(copy);
    const errs = await errorsOf(copy);
    check(errs.some((e) => e.startsWith(pointer + ":")), `a SandboxTemplate with ${what} is rejected at ${pointer}`,
      errs.join("\n") || "accepted");
  }
}

main()
  .catch((e) => check(false, "the tier ran to its end", e.stack))
  .finally(() => (process.exitCode = finish()));
