// A small reader of the Prometheus text format agentd's /metrics serves.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

export function sum(samples: Sample[], name: string, where: Record<string, string> = {}): number {
  let s = 0;
  for (const x of samples) {
    if (x.name !== name) continue;
    if (Object.entries(where).every(([k, v]) => x.labels[k] === v)) s += x.value;
  }
  return s;
}
