#!/usr/bin/env bash
# Every rule of every shipped rule file is held by a layer in force on this
# host (or marked unenforceable: run): `agentd coverage` plans each tool's
# launch as `agentd run` would, with the layers proven by their canaries.
set -u
AGENTD=$1 RULES=$2
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (canaries, BPF programs, mount plan)"; exit 77; fi
out=$("$AGENTD" coverage --rules "$RULES" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "FAIL: agentd coverage exited $rc"; exit 1; }
tools=$(ls "$RULES"/*.yaml | wc -l)
held=$(grep -c '; 0 held by no layer here$' <<<"$out")
# A tool whose launch stops before its rules are judged (a required
# hardening property its binary lacks) is named, and counted apart.
unplanned=$(grep -c '^[a-z0-9.+-]*: not planned: hardening: ' <<<"$out")
[ "$((held + unplanned))" -eq "$tools" ] || { echo "FAIL: $held of $tools tools have every rule held"; exit 1; }
grep -q 'REFUSED' <<<"$out" && { echo "FAIL: a tool would be refused for a rule no layer holds"; exit 1; }
# The deny below the work directory is the mount layer's here.
json=$("$AGENTD" coverage --rules "$RULES" --tool sh --json)
python3 - "$json" <<'PY' || exit 1
import json, sys
doc = json.loads(sys.argv[1])["sh"]
rows = [r for r in doc["rules"]["coverage"] if r["rule"]["text"].startswith("files.deny: {path: ${workdir}/.git")]
assert rows, "no .git deny row"
assert rows[0]["enforced_by"] == ["mount"], rows[0]
assert "bpf_lsm" in rows[0]["not_in_force"], rows[0]
print("sh: files.deny ${workdir}/.git held by", rows[0]["enforced_by"], "-", rows[0]["how"]["mount"])
PY
echo "coverage_shipped: ok ($tools tools)"
