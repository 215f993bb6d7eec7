#!/usr/bin/env bash
# policyc new, then agentd run: perl and xz, tools no shipped rule file names.
# Each run under its own BPF pin root and cgroup parent (tiers run in parallel).
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: agentd run needs root"; exit 77; }
work=$(mktemp -d)
chmod 0755 "$work"   # the tool runs as an unprivileged uid: it must reach its work directory
leaf="bulwark-authoring-$$"
cg_mount=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
own=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
parent="$cg_mount${own%/}/$leaf"
cleanup() {
  rm -rf "$work" "/sys/fs/bpf/$leaf"
  rmdir "$parent" 2>/dev/null || true
}
trap cleanup EXIT
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

mkdir -p "$work/rules" "$work/wd"
cp -r "$RULES/base" "$work/rules/"
chmod 0777 "$work/wd"
echo "task input" > "$work/wd/in.txt"
run() {  # run TOOL ARGV...: agentd run under the written rules
  local tool=$1
  shift
  "$AGENTD" run --rules "$work/rules" --tool "$tool" --workdir "$work/wd" \
    --bpf-pin-root "/sys/fs/bpf/$leaf" --bpf-cgroup-parent "$parent" -- "$@" 2>"$work/err"
  local rc=$?
  [ $rc = 0 ] || grep -v "bpf: " "$work/err" | head -20 >&2
  return $rc
}

# 1. perl: libm and libcrypt beside libc (the libraries a user otherwise finds one failed run at a time),
#    asked for with `libraries: auto` and granted by the compiler, each a rule naming where it came from
out=$("$POLICYC" new perl --binary /usr/bin/perl -o "$work/rules/perl.yaml" 2>&1)
if [ $? = 0 ] && grep -q "libraries: auto" "$work/rules/perl.yaml" && grep -q "libcrypt.so.1" "$work/rules/perl.yaml"; then
  pass "policyc new perl: $out"
else
  fail "policyc new perl: $out $(cat "$work/rules/perl.yaml" 2>/dev/null)"
fi
explained=$("$POLICYC" explain --rules-dir "$work/rules" "$work/rules/perl.yaml" 2>&1)
for lib in libcrypt.so.1 libm.so.6; do
  echo "$explained" | grep -q "files.library: .*/$lib.* (read, exec; $lib needed by .*, found via " &&
    pass "explain names $lib, what needs it and where it was found" ||
    fail "explain lacks $lib's library rule: $(echo "$explained" | grep -m3 library)"
done
out=$(run perl perl -e 'open(F, "<", "in.txt") or die "open: $!"; print "read: ", <F>')
[ "$out" = "read: task input" ] && pass "perl starts under its new rule file and reads the work directory" ||
  fail "perl under its new rule file: '$out' $(head -c 1500 "$work/err")"
# What the file does not grant: a host file (control: unconfined, perl reads it)
probe='open(F, "<", "/etc/passwd") or die "refused: $!\n"; print "read /etc/passwd\n"'
[ "$(perl -e "$probe" 2>&1)" = "read /etc/passwd" ] && pass "control: unconfined, perl reads /etc/passwd" ||
  fail "control: perl cannot read /etc/passwd unconfined"
out=$(run perl perl -e "$probe" 2>&1)
echo "$out" | grep -q "^refused: " && pass "under the rule file, /etc/passwd is refused: $out" ||
  fail "perl read /etc/passwd under its rule file: $out"
# ... and exec of anything but itself (control: unconfined, perl runs /bin/true)
probe='exec("/usr/bin/true") or die "refused: $!\n"'
perl -e "$probe" && pass "control: unconfined, perl executes /usr/bin/true" || fail "control: perl cannot exec /usr/bin/true"
out=$(run perl perl -e "$probe" 2>&1)
echo "$out" | grep -q "^refused: " && pass "under the rule file, executing /usr/bin/true is refused: $out" ||
  fail "perl executed /usr/bin/true under its rule file: $out"

# 2. xz, a compressor (liblzma): the starting file plus the work directory's write rights
"$POLICYC" new xz --binary /usr/bin/xz -o "$work/rules/xz.yaml" >/dev/null 2>"$work/err" ||
  fail "policyc new xz: $(cat "$work/err")"
sed -i 's|^files:$|files:\n  write: ["${workdir}"]\n  create: ["${workdir}"]\n  remove: ["${workdir}"]|' "$work/rules/xz.yaml"
if "$POLICYC" check --rules-dir "$work/rules" "$work/rules/xz.yaml" >/dev/null 2>"$work/err"; then
  run xz xz -k in.txt >/dev/null && [ -f "$work/wd/in.txt.xz" ] &&
    pass "xz compresses in the work directory under its new rule file" ||
    fail "xz under its new rule file: $(head -c 1500 "$work/err")"
else
  fail "xz.yaml with the work directory's rights does not compile: $(cat "$work/err")"
fi

# 2b. agentd learn: what a command needs beyond the starting file, learned from its refusals
#     (rounds under the rules learned so far) and confirmed by a round refused nothing.
# (outside /tmp: every run has a private /tmp of its own)
outside=$(mktemp -d /var/tmp/bulwark-authoring.XXXXXX)
trap 'cleanup; rm -rf "$outside"' EXIT
echo "outside data" > "$outside/data.txt" && chmod 0755 "$outside" && chmod 0644 "$outside/data.txt"
copy='open(F, "<", "'"$outside"'/data.txt") or die "read: $!\n"; my $l = <F>;
  open(G, ">", "copy.txt") or die "write: $!\n"; print G $l; close(G) or die "close: $!\n"; print "copied\n"'
learn() {  # learn TOOL ARGV...
  local tool=$1
  shift
  "$AGENTD" learn --rules "$work/rules" --tool "$tool" --workdir "$work/wd" \
    --bpf-pin-root "/sys/fs/bpf/$leaf" --bpf-cgroup-parent "$parent" -- "$@" 2>"$work/learn.err"
}
out=$(run perl perl -e "$copy" 2>&1)
[ "$out" != "copied" ] && pass "under perl.yaml the copy is refused: $out" || fail "perl.yaml let the copy through"
out=$(learn perl perl -e "$copy")
rc=$?
learned="$work/rules/perl.learned.yaml"
if [ $rc = 0 ] && [ "$out" = "copied" ] && grep -q "confirmed: round [0-9]* under it was refused nothing" "$work/learn.err" &&
  grep -q "^  read:" "$learned" && grep -q "$outside/data.txt *# deny landlock " "$learned" &&
  grep -q '"${workdir}' "$learned"; then
  pass "agentd learn perl: $(tail -1 "$work/learn.err")"
else
  fail "agentd learn perl (exit $rc, out '$out'): $(cat "$work/learn.err") $(cat "$learned" 2>/dev/null)"
fi
rm -f "$work/wd/copy.txt"
out=$(run perl.learned perl -e "$copy")
[ "$out" = "copied" ] && [ "$(cat "$work/wd/copy.txt" 2>/dev/null)" = "outside data" ] &&
  pass "agentd run --tool perl.learned: the command runs enforced" || fail "perl.learned run: '$out' $(head -c 1500 "$work/err")"
out=$(run perl.learned perl -e 'open(F, "<", "/etc/passwd") or die "refused: $!\n"; print "read /etc/passwd\n"' 2>&1)
echo "$out" | grep -q "^refused: " && pass "perl.learned still refuses what the command did not do: $out" ||
  fail "perl.learned read /etc/passwd: $out"
# An explicit deny of the starting file is never lifted: learn stops, says so, exits 1.
printf 'tool: perl-nodata\nextends: perl\nfiles:\n  deny: ["%s/data.txt"]\n' "$outside" > "$work/rules/perl-nodata.yaml"
learn perl-nodata perl -e "$copy" >/dev/null
rc=$?
[ $rc = 1 ] && grep -q "learned nothing new" "$work/learn.err" && grep -q "1 refusal(s) left" "$work/learn.err" &&
  pass "a deny of the starting file stays: learn exits 1 with the refusal left" ||
  fail "learn under a deny (exit $rc): $(cat "$work/learn.err")"

# A socket family outside network.families is refused by seccomp, whose audit record
# carries no arguments: learn says which call and why, and drafts no rule for it (a
# syscalls.allow of socket would change nothing).
nl='my $r = syscall(41, 16, 3, 0); print $r < 0 ? "refused: $!\n" : "netlink\n"'
out=$(perl -e "$nl")
[ "$out" = "netlink" ] && pass "control: unconfined perl opens a netlink socket" || fail "control: netlink socket: $out"
printf 'tool: perl-sock\nextends: perl\n' > "$work/rules/perl-sock.yaml"
out=$(learn perl-sock perl -e "$nl")
rc=$?
[ $rc = 1 ] && [ "$out" = "" ] && grep -q "refused: Operation not permitted" <<<"$(run perl-sock perl -e "$nl" 2>/dev/null)" &&
  grep -q "not learned: socket(2) was refused a socket family outside network.families" "$work/learn.err" &&
  [ ! -e "$work/rules/perl-sock.learned.yaml" ] &&
  pass "a family refusal: learn names it, learns nothing, exits 1" ||
  fail "learn a netlink socket (exit $rc, out '$out'): $(cat "$work/learn.err") $(cat "$work/rules/perl-sock.learned.yaml" 2>/dev/null)"

# 3. What policyc new refuses: a library the loader would not find, a script,
#    a relative path, a bad tool name.
printf 'int gone(void) { return 0; }\n' > "$work/gone.c"
printf 'int gone(void);\nint main(void) { return gone(); }\n' > "$work/main.c"
if cc -shared -fPIC -o "$work/libgone.so" "$work/gone.c" && cc -o "$work/prog" "$work/main.c" -L"$work" -lgone; then
  rm "$work/libgone.so"
  out=$("$POLICYC" new prog --binary "$work/prog" 2>&1)
  [ $? = 1 ] && echo "$out" | grep -q "would not find: libgone.so (needed by $work/prog)" &&
    pass "a missing library is named: $out" || fail "missing library: $out"
  # libraries: auto is resolved at every compile: a file written while the
  # library was there stops compiling once it is gone, at the key, naming it.
  cc -shared -fPIC -o "$work/libgone.so" "$work/gone.c"
  cc -o "$work/prog" "$work/main.c" -L"$work" -lgone -Wl,-rpath,'$ORIGIN'
  "$POLICYC" new prog --binary "$work/prog" -o "$work/rules/prog.yaml" >/dev/null 2>"$work/err" &&
    grep -q "libgone.so" "$work/rules/prog.yaml" && pass "policyc new prog: libgone.so found through RUNPATH \$ORIGIN" ||
    fail "policyc new prog with libgone.so present: $(cat "$work/err")"
  rm "$work/libgone.so"
  line=$(grep -n "libraries: auto" "$work/rules/prog.yaml" | cut -d: -f1)
  out=$("$POLICYC" check --rules-dir "$work/rules" "$work/rules/prog.yaml" 2>&1)
  [ $? != 0 ] && echo "$out" | grep -q "prog.yaml:$line:[0-9]*: error.*would not find: libgone.so" &&
    pass "with libgone.so gone the file no longer compiles, at its key: $out" ||
    fail "compile after libgone.so was removed (line $line): $out"
else
  fail "cc could not build the missing-library specimen"
fi
printf '#!/bin/sh\necho hi\n' > "$work/script.sh" && chmod +x "$work/script.sh"
out=$("$POLICYC" new script --binary "$work/script.sh" 2>&1)
[ $? = 1 ] && echo "$out" | grep -q "for a script, list its interpreter" && pass "a script: $out" || fail "script: $out"
out=$("$POLICYC" new perl --binary perl 2>&1)
[ $? = 1 ] && echo "$out" | grep -q "not an absolute path" && pass "relative path: $out" || fail "relative path: $out"
out=$("$POLICYC" new 'Perl!' --binary /usr/bin/perl 2>&1)
[ $? = 2 ] && echo "$out" | grep -q "must match" && pass "bad tool name: $out" || fail "bad tool name: $out"

[ "$failures" = 0 ] || { echo "authoring: $failures failure(s)"; exit 1; }
echo "authoring: ok"
