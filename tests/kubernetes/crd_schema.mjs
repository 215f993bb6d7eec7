// A CustomResourceDefinition's openAPIV3Schema as the API server applies it
// to a custom resource, compiled for ajv:
// - pruning made strict: the server drops (and with strict field validation
//   refuses) every field a structural schema does not define, so each object
//   schema without additionalProperties or x-kubernetes-preserve-unknown-fields
//   gets additionalProperties: false;
// - the root's metadata is left to ObjectMeta (the server validates it as
//   such, not by the CRD's `type: object`);
// - formats int32/int64 are range checks; x-kubernetes-list-type set/map are
//   uniqueness checks (of whole items / of the x-kubernetes-list-map-keys);
//   the other x-kubernetes-* extensions are annotations here.
// Not evaluated: x-kubernetes-validations (CEL rules); a schema that has any
// is refused, so none is silently skipped.
import Ajv from "ajv";
import addFormats from "ajv-formats";

const INT32 = [-(2 ** 31), 2 ** 31 - 1];
const INT64 = [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];

function strictCopy(node, atRoot) {
  if (Array.isArray(node)) return node.map((n) => strictCopy(n, false));
  if (node === null || typeof node !== "object") return node;
  if ("x-kubernetes-validations" in node) throw new Error("x-kubernetes-validations (CEL) is not evaluated by this check");
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "properties") {
      out.properties = {};
      for (const [name, sub] of Object.entries(v))
        out.properties[name] = atRoot && name === "metadata" ? {} : strictCopy(sub, false);
    } else if (k === "default") {
      out.default = v; // data, not a schema
    } else {
      out[k] = strictCopy(v, false);
    }
  }
  const isObject = out.type === "object";
  if (isObject && !("additionalProperties" in out) && out["x-kubernetes-preserve-unknown-fields"] !== true)
    out.additionalProperties = false;
  return out;
}

export function compileCrdVersion(openAPIV3Schema) {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, useDefaults: false });
  addFormats(ajv);
  ajv.addFormat("int32", { type: "number", validate: (n) => Number.isInteger(n) && n >= INT32[0] && n <= INT32[1] });
  ajv.addFormat("int64", { type: "number", validate: (n) => Number.isInteger(n) && n >= INT64[0] && n <= INT64[1] });
  for (const k of ["x-kubernetes-map-type", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-list-map-keys"])
    ajv.addKeyword({ keyword: k });
  ajv.addKeyword({
    keyword: "x-kubernetes-list-type",
    type: "array",
    errors: true,
    compile(listType, parentSchema) {
      const keys = parentSchema["x-kubernetes-list-map-keys"] ?? [];
      const identity = listType === "map"
        ? (item) => JSON.stringify(keys.map((k) => item?.[k]))
        : listType === "set" ? (item) => JSON.stringify(item) : null;
      const check = function (data) {
        if (!identity) return true;
        const seen = new Set();
        for (const item of data) {
          const id = identity(item);
          if (seen.has(id)) {
            check.errors = [{ keyword: "x-kubernetes-list-type", message: `duplicate ${listType} entry ${id}`, params: { listType } }];
            return false;
          }
          seen.add(id);
        }
        return true;
      };
      return check;
    },
  });
  return ajv.compile(strictCopy(openAPIV3Schema, true));
}
