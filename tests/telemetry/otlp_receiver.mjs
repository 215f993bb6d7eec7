// An OTLP/HTTP logs receiver that decodes what it is sent with the official
// OpenTelemetry protocol types: the classes protobufjs generated from
// opentelemetry-proto (collector/logs/v1 ExportLogsServiceRequest and the
// messages below it), shipped in @opentelemetry/otlp-transformer.
//
//   protobuf  decode(); verify(); the message encoded again must give the
//             same bytes (an unknown field, a wrong wire type or a
//             non-canonical encoding shows as a difference)
//   json      the OTLP JSON mapping's exceptions to proto3 JSON undone (hex
//             trace and span ids); fromObject(); verify(); toObject() must
//             give back exactly what was sent (an unknown key or a value of
//             the wrong type shows as a difference)
//
// A request that fails either way is answered 400 and counted in `invalid`
// with the reason; a valid one is answered 200 with an
// ExportLogsServiceResponse in the request's encoding, unless `script` says
// otherwise (a list of statuses for the next requests, e.g. [503, 503]).
import http from "node:http";
import { createRequire } from "node:module";
import { isDeepStrictEqual } from "node:util";

const require = createRequire(import.meta.url);
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
const { ExportLogsServiceRequest, ExportLogsServiceResponse } = root.opentelemetry.proto.collector.logs.v1;

const hex = (bytes) => Buffer.from(bytes ?? []).toString("hex");

// AnyValue (as toObject gives it, longs as strings) -> a JS value
function anyValue(v) {
  if (!v) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return BigInt(v.intValue);
  if ("boolValue" in v) return v.boolValue;
  if ("doubleValue" in v) return v.doubleValue;
  if ("bytesValue" in v) return v.bytesValue;
  if ("arrayValue" in v) return (v.arrayValue.values ?? []).map(anyValue);
  if ("kvlistValue" in v) return attrs(v.kvlistValue.values);
  return undefined;
}
function attrs(list) {
  const out = {};
  for (const kv of list ?? []) {
    if (kv.key in out) throw new Error(`attribute ${kv.key} twice`);
    out[kv.key] = anyValue(kv.value);
  }
  return out;
}

const toObjectOptions = { longs: String, enums: Number, bytes: String, defaults: false, arrays: false };

// The JSON mapping's hex ids -> base64 (proto3 JSON's bytes), in place.
function hexIdsToBase64(req) {
  for (const rl of req?.resourceLogs ?? [])
    for (const sl of rl?.scopeLogs ?? [])
      for (const lr of sl?.logRecords ?? [])
        for (const k of ["traceId", "spanId"])
          if (typeof lr[k] === "string") {
            if (!/^[0-9a-f]*$/.test(lr[k]) || lr[k].length % 2) throw new Error(`${k} '${lr[k]}' is not lowercase hex`);
            lr[k] = Buffer.from(lr[k], "hex").toString("base64");
          }
}

export function decodeProtobuf(buf) {
  const msg = ExportLogsServiceRequest.decode(buf);
  const err = ExportLogsServiceRequest.verify(msg);
  if (err) throw new Error(`verify: ${err}`);
  const again = Buffer.from(ExportLogsServiceRequest.encode(msg).finish());
  if (Buffer.compare(again, buf) !== 0)
    throw new Error(`re-encoded differently (${again.length} vs ${buf.length} bytes): unknown or non-canonical fields`);
  return msg;
}

export function decodeJson(text) {
  const sent = JSON.parse(text);
  hexIdsToBase64(sent);
  const msg = ExportLogsServiceRequest.fromObject(sent);
  const err = ExportLogsServiceRequest.verify(msg);
  if (err) throw new Error(`verify: ${err}`);
  const back = ExportLogsServiceRequest.toObject(msg, toObjectOptions);
  if (!isDeepStrictEqual(back, sent)) {
    throw new Error(`not the official message: ${JSON.stringify(sent).slice(0, 300)} read back as ` +
                    `${JSON.stringify(back).slice(0, 300)}`);
  }
  return msg;
}

// The decoded request's log records, flattened: one object per record with
// its resource and scope.
export function flatten(msg) {
  const out = [];
  for (const rl of msg.resourceLogs) {
    const resource = rl.resource
      ? attrs(root.opentelemetry.proto.resource.v1.Resource.toObject(rl.resource, toObjectOptions).attributes)
      : {};
    for (const sl of rl.scopeLogs) {
      const scope = sl.scope ? { name: sl.scope.name, version: sl.scope.version } : {};
      for (const lr of sl.logRecords) {
        const o = root.opentelemetry.proto.logs.v1.LogRecord.toObject(lr, toObjectOptions);
        const a = attrs(o.attributes);
        out.push({
          resource,
          scope,
          timeUnixNano: BigInt(o.timeUnixNano ?? 0),
          observedTimeUnixNano: BigInt(o.observedTimeUnixNano ?? 0),
          severityNumber: o.severityNumber,
          severityText: o.severityText,
          eventName: o.eventName,
          body: anyValue(o.body),
          attributes: a,
          traceId: hex(lr.traceId),
          spanId: hex(lr.spanId),
          flags: o.flags ?? 0,
          seq: a["bulwark.seq"] === undefined ? undefined : Number(a["bulwark.seq"]),
        });
      }
    }
  }
  return out;
}

export class Receiver {
  constructor() {
    this.records = [];   // every log record of every accepted request
    this.requests = [];  // {status, encoding, records}
    this.invalid = [];   // reasons
    this.script = [];    // statuses for the next requests
    this.sockets = new Set();
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on("connection", (s) => {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    });
  }

  async listen() {
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = this.server.address().port;
    this.url = `http://127.0.0.1:${this.port}/v1/logs`;
    return this;
  }

  // Stops listening and drops every connection: from now on the endpoint is dead.
  async kill() {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  handle(req, res) {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const buf = Buffer.concat(chunks);
      const ctype = req.headers["content-type"] ?? "";
      const encoding = ctype.startsWith("application/x-protobuf") ? "protobuf"
        : ctype.startsWith("application/json") ? "json" : null;
      if (req.method !== "POST" || req.url !== "/v1/logs" || !encoding) {
        this.invalid.push(`${req.method} ${req.url} content-type '${ctype}'`);
        res.writeHead(415).end();
        return;
      }
      const scripted = this.script.shift();
      if (scripted && scripted !== 200) {
        this.requests.push({ status: scripted, encoding, records: 0 });
        res.writeHead(scripted, { "content-type": "text/plain", "retry-after": "0" }).end("not now");
        return;
      }
      let msg;
      try {
        msg = encoding === "protobuf" ? decodeProtobuf(buf) : decodeJson(buf.toString("utf8"));
      } catch (e) {
        this.invalid.push(`${encoding}: ${e.message}`);
        res.writeHead(400, { "content-type": "text/plain" }).end(e.message);
        return;
      }
      const recs = flatten(msg);
      this.records.push(...recs);
      this.requests.push({ status: 200, encoding, records: recs.length });
      const answer = ExportLogsServiceResponse.create({});
      if (encoding === "protobuf") {
        res.writeHead(200, { "content-type": "application/x-protobuf" });
        res.end(Buffer.from(ExportLogsServiceResponse.encode(answer).finish()));
      } else {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(ExportLogsServiceResponse.toObject(answer)));
      }
    });
  }
}
