#!/usr/bin/env python3
"""build_image: the microVM guest image (kernel + initramfs + manifest).

    build_image.py --agent PATH --out DIR --cache DIR [--extra SRC:DEST ...]
                   [--kernel-package NAME]

Writes into --out:
  vmlinux         the uncompressed kernel (ELF with a PVH note) of a Debian
                  kernel package, booted directly by qemu -M microvm / PVH
  initramfs.cpio  an uncompressed newc cpio: /init = the static --agent, the
                  9p / virtio-serial modules with /lib/modules/load-order,
                  /dev/console, /dev/null and the --extra files
  image.json      the manifest (hashes, kernel, modules, cmdline, digest)

The kernel .deb is fetched with `apt-get download` into --cache and kept there,
with the vmlinux and modules taken out of it (--cache/kernel-<sha256>/), so a
new agent does not decompress the .deb again.
When the kernel cannot be obtained (apt fails, no network, nothing usable in
the cache), the script exits 0 and writes --out/unavailable.txt with the
reason instead of image.json. Any other failure (bad agent, broken .deb,
missing decompressor) exits 1 with a message. Building twice with the same
inputs gives byte-identical files; a rebuild whose inputs are unchanged only
checks the outputs and returns. Python 3.11 standard library only.
"""
import argparse
import fcntl
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from email.utils import parsedate_to_datetime

SCHEMA = 1
CMDLINE = "console=ttyS0 quiet panic=-1 reboot=t tsc=reliable cryptomgr.notests"
# The 9p work directory and the virtio-serial channel, in load order.
WANTED_CORE = ["virtio_ring", "virtio", "virtio_mmio", "virtio_console",
               "netfs", "fscache", "9pnet", "9pnet_virtio", "9p"]
# Without these (as module or built in) the guest has no work dir / channel.
REQUIRED = ["virtio_mmio", "virtio_console", "9pnet_virtio", "9p"]
# A later user-mode network; listed after the 9p chain.
WANTED_NET = ["virtio_net", "net_failover", "failover"]
DIRS = ["dev", "lib", "lib/modules", "mnt", "proc", "run", "sys", "sysroot", "tmp"]
DECOMPRESSOR_PACKAGE = {"zstd": "zstd", "lz4": "lz4", "xz": "xz-utils"}
KERNEL_612 = re.compile(r"^linux-image-6\.12\.(\d+)\+deb(\d+)-amd64$")
KERNEL_ANY = re.compile(r"^linux-image-(\d+)\.(\d+)\.(\d+)(?:-(\d+))?(?:\+deb(\d+))?-amd64$")


class Unavailable(Exception):
    """The kernel cannot be obtained: exit 0 with unavailable.txt."""


class BuildError(Exception):
    """Anything else: exit 1."""


def log(msg):
    print(f"build_image: {msg}", file=sys.stderr, flush=True)


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path, data):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------- ELF helpers

class Elf:
    """The few ELF64 little-endian facts needed here."""

    def __init__(self, data, what):
        if data[:4] != b"\x7fELF":
            raise BuildError(f"{what} is not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise BuildError(f"{what} is not a 64-bit little-endian ELF")
        self.data = data
        self.what = what
        (self.e_type, self.e_machine, _, _, self.phoff, self.shoff, _, _, self.phentsize,
         self.phnum, self.shentsize, self.shnum, self.shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)

    def program_headers(self):
        for i in range(self.phnum):
            p_type, _, p_offset, _, _, p_filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", self.data, self.phoff + i * self.phentsize)
            yield p_type, p_offset, p_filesz

    def sections(self):
        if not self.shoff or not self.shnum:
            return {}
        hdrs = []
        for i in range(self.shnum):
            (name, _, _, _, offset, size, _, _, _, _) = struct.unpack_from(
                "<IIQQQQIIQQ", self.data, self.shoff + i * self.shentsize)
            hdrs.append((name, offset, size))
        _, stroff, strsize = hdrs[self.shstrndx]
        strtab = self.data[stroff:stroff + strsize]
        out = {}
        for name, offset, size in hdrs:
            end = strtab.find(b"\0", name)
            out[strtab[name:end].decode("latin-1")] = self.data[offset:offset + size]
        return out

    def notes(self):
        for p_type, off, size in self.program_headers():
            if p_type != 4:  # PT_NOTE
                continue
            pos, end = off, off + size
            while pos + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", self.data, pos)
                pos += 12
                name = self.data[pos:pos + namesz].rstrip(b"\0")
                pos += (namesz + 3) & ~3
                desc = self.data[pos:pos + descsz]
                pos += (descsz + 3) & ~3
                yield name, ntype, desc


def check_static_agent(path):
    """Return the agent's bytes; fail unless it is a static x86-64 executable."""
    try:
        data = open(path, "rb").read()
    except OSError as e:
        raise BuildError(f"cannot read --agent {path}: {e.strerror}")
    elf = Elf(data, f"--agent {path}")
    if elf.e_machine != 62:
        raise BuildError(f"--agent {path} is not an x86-64 ELF (e_machine {elf.e_machine})")
    if elf.e_type not in (2, 3):
        raise BuildError(f"--agent {path} is not an executable (ELF type {elf.e_type})")
    for p_type, off, size in elf.program_headers():
        if p_type == 3:  # PT_INTERP
            interp = data[off:off + size].rstrip(b"\0").decode("latin-1")
            raise BuildError(f"--agent {path} is dynamically linked (PT_INTERP {interp}); the guest has no "
                             f"dynamic loader or libc: link it with -static")
    return data


def has_interp(data):
    try:
        return any(t == 3 for t, _, _ in Elf(data, "").program_headers())
    except (BuildError, struct.error):
        return False


# ------------------------------------------------------------ apt and cache

def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def apt_records(*patterns):
    """{package: (version, sha256, depends)} of the candidates apt-cache show prints."""
    try:
        p = run(["apt-cache", "show", "--no-all-versions", *patterns])
    except FileNotFoundError:
        return {}
    out = {}
    for record in p.stdout.split("\n\n"):
        fields = {}
        for line in record.splitlines():
            m = re.match(r"^([A-Za-z0-9-]+): (.*)$", line)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2).strip()
        if "Package" in fields and "Version" in fields:
            out.setdefault(fields["Package"], (fields["Version"], fields.get("SHA256"), fields.get("Depends", "")))
    return out


def resolve_kernel(override):
    """(package, version, apt_sha256) from apt's lists, or raise Unavailable."""
    if not shutil.which("apt-cache"):
        raise Unavailable("apt-cache is not installed (not a Debian host)")
    if override:
        info = apt_records(override).get(override)
        if not info:
            raise Unavailable(f"apt-cache knows no installable package {override}")
        return override, info[0], info[1]
    # One apt-cache call (a glob) lists every 6.12 candidate; the regex drops
    # the -rt-, -cloud-, -dbg and -unsigned variants the glob also matches.
    found = []
    for name, info in apt_records("linux-image-6.12.*+deb*-amd64").items():
        m = KERNEL_612.match(name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2))), name, info))
    if found:
        _, name, info = max(found)
        return name, info[0], info[1]
    meta = apt_records("linux-image-amd64").get("linux-image-amd64")
    m = re.search(r"(?:^|,\s*)(linux-image-[0-9][^\s,(]*)", meta[2]) if meta else None
    if m:
        info = apt_records(m.group(1)).get(m.group(1))
        if info:
            return m.group(1), info[0], info[1]
    raise Unavailable("apt-cache finds no linux-image-6.12.*+deb12-amd64 and no kernel behind linux-image-amd64 "
                      "(run apt-get update?)")


def deb_filename(pkg, version):
    return f"{pkg}_{version.replace(':', '%3a')}_amd64.deb"


def cached_sha256(path):
    """sha256 of a cached .deb, remembered beside it for (size, mtime)."""
    st = os.stat(path)
    side = path + ".sha256"
    key = f"{st.st_size} {st.st_mtime_ns}"
    try:
        k, h = open(side).read().rsplit(" ", 1)
        if k == key and re.fullmatch(r"[0-9a-f]{64}", h.strip()):
            return h.strip()
    except (OSError, ValueError):
        pass
    h = sha256_file(path)
    write_atomic(side, f"{key} {h}".encode())
    return h


def newest_cached_kernel(cache):
    best = None
    for name in os.listdir(cache):
        m = re.match(r"^(linux-image-[^_]+)_([^_]+)_amd64\.deb$", name)
        if not m:
            continue
        k = KERNEL_ANY.match(m.group(1))
        if not k:
            continue
        key = (int(k.group(1)), int(k.group(2)), int(k.group(3)), int(k.group(4) or 0), int(k.group(5) or 0))
        if best is None or key > best[0]:
            best = (key, m.group(1), m.group(2).replace("%3a", ":"), os.path.join(cache, name))
    return best


def obtain_kernel(cache, override):
    """(package, version, deb path, deb sha256); raises Unavailable."""
    try:
        pkg, version, apt_sha = resolve_kernel(override)
    except Unavailable as e:
        fallback = None if override else newest_cached_kernel(cache)
        if not fallback:
            raise
        _, pkg, version, path = fallback
        log(f"{e}; using the cached {os.path.basename(path)}")
        return pkg, version, path, cached_sha256(path)
    path = os.path.join(cache, deb_filename(pkg, version))
    if not os.path.exists(path):
        log(f"apt-get download {pkg} ({version})")
        tmp = tempfile.mkdtemp(dir=cache, prefix=".download.")
        try:
            try:
                p = run(["apt-get", "download", "-q", f"{pkg}={version}"], cwd=tmp)
            except FileNotFoundError:
                p = subprocess.CompletedProcess([], 127, "", "apt-get is not installed")
            debs = [n for n in os.listdir(tmp) if n.endswith(".deb")]
            if p.returncode != 0 or len(debs) != 1:
                err = " ".join(line.strip() for line in (p.stderr or p.stdout).splitlines()
                               if line.startswith(("E:", "Err")) or "Could not" in line) or \
                    (p.stderr or p.stdout).strip()[-400:]
                reason = f"apt-get download {pkg}={version} failed (exit {p.returncode}): {err}"
                fallback = None if override else newest_cached_kernel(cache)
                if not fallback:
                    raise Unavailable(reason)
                _, pkg, version, path = fallback
                log(f"{reason}; using the cached {os.path.basename(path)}")
                return pkg, version, path, cached_sha256(path)
            os.replace(os.path.join(tmp, debs[0]), path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    digest = cached_sha256(path)
    if apt_sha and digest != apt_sha:
        remove(path)
        remove(path + ".sha256")
        raise BuildError(f"{os.path.basename(path)} in the cache has sha256 {digest}, apt expects {apt_sha}: "
                         f"removed it, run again to download it anew")
    return pkg, version, path, digest


# ------------------------------------------------------------ kernel, modules

def need_tool(tool):
    if not shutil.which(tool):
        raise BuildError(f"the `{tool}` tool is needed to decompress the kernel: "
                         f"apt-get install {DECOMPRESSOR_PACKAGE[tool]}")


def decompress(data, what):
    """Decompress one xz / zstd / lz4 / gzip stream (trailing bytes ignored)."""
    if data[:6] == b"\xfd7zXZ\x00":
        d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
        try:
            return d.decompress(data)
        except lzma.LZMAError as e:
            raise BuildError(f"{what}: xz: {e}")
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise BuildError(f"{what}: gzip: {e}")
    for magic, tool, cmd in ((b"\x28\xb5\x2f\xfd", "zstd", ["zstd", "-dcq"]),
                             (b"\x02\x21\x4c\x18", "lz4", ["lz4", "-dcq"]),
                             (b"\x04\x22\x4d\x18", "lz4", ["lz4", "-dcq"])):
        if data[:4] == magic:
            need_tool(tool)
            # The kernel appends 4 bytes (its size) after the stream: the tool
            # may complain about them; the caller checks the output itself.
            p = subprocess.run(cmd, input=data, capture_output=True)
            return p.stdout
    raise BuildError(f"{what}: unknown compression (magic {data[:6].hex()})")


def extract_vmlinux(data, what):
    """The uncompressed ELF vmlinux inside a bzImage."""
    if data[0x202:0x206] != b"HdrS":
        raise BuildError(f"{what} is not a bzImage (no HdrS header)")
    candidates = []
    setup_sects = data[0x1F1] or 4
    payload_offset, payload_length = struct.unpack_from("<II", data, 0x248)
    start = (setup_sects + 1) * 512 + payload_offset
    if payload_length and start + payload_length <= len(data):
        candidates.append((start, start + payload_length))
    # A scan for the compression magic, if the header's payload fields do not work.
    for magic in (b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"\x02\x21\x4c\x18"):
        off = data.find(magic)
        while off >= 0 and len(candidates) < 24:
            candidates.append((off, len(data)))
            off = data.find(magic, off + 1)
    errors = []
    for begin, end in candidates:
        try:
            out = decompress(data[begin:end], what)
        except BuildError as e:
            if "is needed" in str(e):
                raise
            errors.append(str(e))
            continue
        if out[:4] != b"\x7fELF":
            continue
        if end - begin >= 4 and end == begin + payload_length:
            (size,) = struct.unpack_from("<I", data, end - 4)
            if size != len(out):
                errors.append(f"{what}: payload says {size} bytes, got {len(out)}")
                continue
        return out
    raise BuildError(f"no ELF kernel payload found in {what}" + (f" ({errors[0]})" if errors else ""))


def check_pvh(vmlinux):
    elf = Elf(vmlinux, "vmlinux")
    if elf.e_machine != 62:
        raise BuildError(f"vmlinux is not x86-64 (e_machine {elf.e_machine})")
    for name, ntype, _ in elf.notes():
        if name == b"Xen" and ntype == 0x12:  # XEN_ELFNOTE_PHYS32_ENTRY
            return
    raise BuildError("vmlinux has no PVH entry (no Xen ELF note 0x12): qemu -M microvm cannot boot it directly")


def modinfo(ko, what):
    sec = Elf(ko, what).sections().get(".modinfo")
    if sec is None:
        raise BuildError(f"{what} has no .modinfo section")
    info = {}
    for item in sec.split(b"\0"):
        if b"=" in item:
            k, v = item.decode("latin-1").split("=", 1)
            info.setdefault(k, v)
    return info


def norm(name):
    return name.replace("-", "_")


class KernelDeb:
    """The parts of a kernel .deb the image needs, read from its data tarball
    (dpkg-deb --fsys-tarfile, streamed: nothing is unpacked to disk, which on
    this project's machines saved 3-4 s of writing and removing ~1000
    directories per cold build)."""

    def __init__(self, deb, pkg):
        self.deb, self.pkg, self.what = deb, pkg, os.path.basename(deb)
        self.kver = self.vmlinuz = self.builtin = self.changelog = None
        self.module_paths = {}  # name -> path in the .deb
        self.module_data = {}   # name -> raw (maybe compressed) bytes, the ones asked for
        self._scan(set(WANTED_CORE + WANTED_NET), first=True)
        if self.kver is None:
            raise BuildError(f"{self.what}: no lib/modules/<version>/ in the package")
        if self.vmlinuz is None:
            raise BuildError(f"{self.what} has no boot/vmlinuz-{self.kver}")
        if self.builtin is None:
            raise BuildError(f"{self.what} has no lib/modules/{self.kver}/modules.builtin")

    def _scan(self, names, first=False):
        p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", self.deb], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        kvers = set()
        try:
            with tarfile.open(fileobj=p.stdout, mode="r|") as tar:
                for m in tar:
                    path = m.name[2:] if m.name.startswith("./") else m.name
                    parts = path.split("/")
                    if len(parts) >= 3 and parts[:2] == ["lib", "modules"]:
                        kvers.add(parts[2])
                    if not m.isfile():
                        continue
                    if first and len(parts) == 2 and parts[0] == "boot" and parts[1].startswith("vmlinuz-"):
                        self.vmlinuz = (parts[1][len("vmlinuz-"):], tar.extractfile(m).read())
                    elif first and len(parts) == 4 and parts[:2] == ["lib", "modules"] \
                            and parts[3] == "modules.builtin":
                        self.builtin = tar.extractfile(m).read().decode("latin-1")
                    elif first and path == f"usr/share/doc/{self.pkg}/changelog.gz":
                        self.changelog = tar.extractfile(m).read()
                    elif len(parts) > 4 and parts[:2] == ["lib", "modules"] and parts[3] == "kernel":
                        mm = re.match(r"^(.+)\.ko(\.xz|\.zst|\.gz)?$", parts[-1])
                        if mm:
                            name = norm(mm.group(1))
                            self.module_paths[name] = path
                            if name in names:
                                self.module_data[name] = tar.extractfile(m).read()
        except (tarfile.TarError, EOFError, OSError) as e:
            p.kill()
            p.wait()
            raise BuildError(f"{self.what}: cannot read its data tarball: {e}")
        finally:
            p.stdout.close()
        err = p.stderr.read().decode(errors="replace").strip()
        p.stderr.close()
        if p.wait() != 0:
            raise BuildError(f"dpkg-deb --fsys-tarfile {self.what} failed: {err}")
        if first:
            if len(kvers) != 1:
                raise BuildError(f"{self.what}: expected one lib/modules/<version>, found {sorted(kvers)}")
            self.kver = kvers.pop()
            if self.vmlinuz and self.vmlinuz[0] != self.kver:
                raise BuildError(f"{self.what}: boot/vmlinuz-{self.vmlinuz[0]} but lib/modules/{self.kver}")
            self.vmlinuz = self.vmlinuz and self.vmlinuz[1]

    def module(self, name):
        if name not in self.module_data:  # a dependency outside the wanted lists
            self._scan({name})
        return self.module_data[name]


def collect_modules(deb):
    """Modules of the wanted lists and their depends= closure.

    Returns ([(name, bytes)] in load order, built-in names, absent names)."""
    builtin = {norm(os.path.basename(line.strip()).split(".ko")[0]) for line in deb.builtin.splitlines() if line}
    files = deb.module_paths
    loaded = {}

    def load(name):
        if name not in loaded:
            path = files[name]
            raw = deb.module(name)
            ko = raw if path.endswith(".ko") else decompress(raw, os.path.basename(path))
            info = modinfo(ko, os.path.basename(path))
            deps = [norm(d) for d in info.get("depends", "").split(",") if d]
            loaded[name] = (ko, deps)
        return loaded[name]

    order, absent, visiting = [], [], set()

    def visit(name, chain):
        if name in order:
            return
        if name in visiting:
            raise BuildError(f"module dependency cycle: {' -> '.join(chain + [name])}")
        if name not in files:
            raise BuildError(f"module {chain[-1]} depends on {name}, which the kernel package lacks")
        visiting.add(name)
        for dep in load(name)[1]:
            visit(dep, chain + [name])
        visiting.discard(name)
        order.append(name)

    found_builtin = []
    for name in WANTED_CORE + WANTED_NET:
        if name in builtin:
            found_builtin.append(name)
        elif name in files:
            visit(name, [])
        else:
            absent.append(name)
    missing = [m for m in REQUIRED if m in absent]
    if missing:
        raise BuildError(f"the kernel has neither module nor built-in {', '.join(missing)}: "
                         f"no 9p work dir / virtio-serial channel possible")
    return [(n, loaded[n][0]) for n in order], found_builtin, absent


def changelog_epoch(changelog):
    """The date of the newest entry of the package's changelog.gz, or 0."""
    try:
        for line in gzip.decompress(changelog or b"").decode("utf-8", "replace").splitlines():
            m = re.match(r"^ -- .*?>  (.+)$", line)
            if m:
                return int(parsedate_to_datetime(m.group(1)).timestamp())
    except (OSError, EOFError, ValueError, TypeError):
        pass
    return 0


def kernel_parts(cache, deb, deb_sha, pkg, builder_sha, reextract):
    """(kver, vmlinux, [(module, bytes)], builtin, absent, changelog epoch).

    The result of the slow part (decompressing the .deb's data tarball, 5-7 s
    of CPU) is kept in CACHE/kernel-<deb sha256>/ for this builder version,
    with the hash of every file, so a changed agent rebuilds in about a second.
    reextract ignores (and rewrites) that entry."""
    entry = os.path.join(cache, f"kernel-{deb_sha[:24]}")
    meta_path = os.path.join(entry, "meta.json")
    if not reextract:
        try:
            meta = json.load(open(meta_path))
            if meta["deb_sha256"] == deb_sha and meta["builder_sha256"] == builder_sha:
                vmlinux = open(os.path.join(entry, "vmlinux"), "rb").read()
                modules = [(n, open(os.path.join(entry, f"{n}.ko"), "rb").read()) for n, _ in meta["modules"]]
                if sha256_bytes(vmlinux) == meta["vmlinux_sha256"] and \
                        all(sha256_bytes(b) == h for (_, b), (_, h) in zip(modules, meta["modules"])):
                    return (meta["kernel_version"], vmlinux, modules, meta["builtin"], meta["absent"],
                            meta["changelog_epoch"])
                log(f"{entry} does not match its hashes: extracting again")
        except (OSError, ValueError, KeyError, TypeError):
            pass
    log(f"extracting {os.path.basename(deb)}")
    kdeb = KernelDeb(deb, pkg)
    kver = kdeb.kver
    vmlinux = extract_vmlinux(kdeb.vmlinuz, f"vmlinuz-{kver}")
    check_pvh(vmlinux)
    modules, builtin, absent = collect_modules(kdeb)
    epoch = changelog_epoch(kdeb.changelog)
    del kdeb
    tmp = tempfile.mkdtemp(dir=cache, prefix=".kernel.")
    try:
        with open(os.path.join(tmp, "vmlinux"), "wb") as f:
            f.write(vmlinux)
        for n, b in modules:
            with open(os.path.join(tmp, f"{n}.ko"), "wb") as f:
                f.write(b)
        meta = {"deb_sha256": deb_sha, "builder_sha256": builder_sha, "kernel_version": kver,
                "vmlinux_sha256": sha256_bytes(vmlinux), "modules": [[n, sha256_bytes(b)] for n, b in modules],
                "builtin": builtin, "absent": absent, "changelog_epoch": epoch}
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2)
        os.chmod(tmp, 0o755)
        shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
    except OSError as e:
        log(f"warning: cannot keep the extracted kernel in {entry}: {e}")
        shutil.rmtree(tmp, ignore_errors=True)
    return kver, vmlinux, modules, builtin, absent, epoch


# ------------------------------------------------------------------ the cpio

def cpio_newc(entries, mtime):
    """entries: {path: (mode, data, rdev_major, rdev_minor)}, sorted here."""
    out = bytearray()

    def add(ino, name, mode, data, rmaj, rmin, nlink):
        nm = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08X}" for v in (
            ino, mode, 0, 0, nlink, mtime, len(data), 0, 0, rmaj, rmin, len(nm), 0))
        out.extend(hdr.encode() + nm)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    ino = 0
    for name in sorted(entries):
        mode, data, rmaj, rmin = entries[name]
        ino += 1
        add(ino, name, mode, data, rmaj, rmin, 2 if mode & 0o170000 == 0o040000 else 1)
    add(0, "TRAILER!!!", 0, b"", 0, 0, 1)
    out.extend(b"\0" * (-len(out) % 512))
    return bytes(out)


S_IFDIR, S_IFREG, S_IFCHR = 0o040000, 0o100000, 0o020000


def initramfs(agent, modules, extras, mtime):
    entries = {d: (S_IFDIR | (0o1777 if d == "tmp" else 0o755), b"", 0, 0) for d in DIRS}
    entries["dev/console"] = (S_IFCHR | 0o600, b"", 5, 1)
    entries["dev/null"] = (S_IFCHR | 0o666, b"", 1, 3)
    entries["init"] = (S_IFREG | 0o755, agent, 0, 0)
    for name, ko in modules:
        entries[f"lib/modules/{name}.ko"] = (S_IFREG | 0o644, ko, 0, 0)
    entries["lib/modules/load-order"] = (S_IFREG | 0o644, "".join(n + "\n" for n, _ in modules).encode(), 0, 0)
    for dest, data, mode in extras:
        rel = dest.lstrip("/")
        parts = rel.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in entries and entries[parent][0] & 0o170000 != S_IFDIR:
                raise BuildError(f"--extra {dest}: /{parent} is a file in the image")
            entries.setdefault(parent, (S_IFDIR | 0o755, b"", 0, 0))
        if rel in entries:
            raise BuildError(f"--extra {dest}: the image already has /{rel}")
        entries[rel] = (S_IFREG | mode, data, 0, 0)
    return cpio_newc(entries, mtime)


# ------------------------------------------------------------------ the build

def parse_extras(specs):
    extras = []
    for spec in specs:
        if ":" not in spec:
            raise BuildError(f"--extra {spec}: expected SRC:DEST")
        src, dest = spec.rsplit(":", 1)
        dest = os.path.normpath(dest)
        if not dest.startswith("/") or dest == "/" or dest.startswith("//"):
            raise BuildError(f"--extra {spec}: DEST must be an absolute path in the guest")
        rel = dest[1:]
        fixed = {"init", "dev/console", "dev/null", *DIRS}
        if rel in fixed or rel.startswith("lib/modules/") or any(rel.startswith(f + "/") for f in fixed
                                                                 if f not in DIRS):
            raise BuildError(f"--extra {spec}: {dest} is part of the image itself")
        try:
            data = open(src, "rb").read()
            mode = 0o755 if os.stat(src).st_mode & 0o111 else 0o644
        except OSError as e:
            raise BuildError(f"--extra {spec}: cannot read {src}: {e.strerror}")
        if data[:4] == b"\x7fELF" and has_interp(data):
            log(f"warning: --extra {src} is dynamically linked; the guest has no dynamic loader")
        extras.append((dest, data, mode))
    dests = [d for d, _, _ in extras]
    if len(set(dests)) != len(dests):
        raise BuildError("two --extra files have the same DEST")
    return sorted(extras)


def outputs_match(out, manifest):
    for name, key in (("vmlinux", "vmlinux_sha256"), ("initramfs.cpio", "initramfs_sha256")):
        path = os.path.join(out, name)
        if not os.path.isfile(path) or sha256_file(path) != manifest.get(key):
            return False
    return True


def build(args):
    t0 = time.monotonic()
    agent = check_static_agent(args.agent)
    extras = parse_extras(args.extra)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)
    manifest_path = os.path.join(args.out, "image.json")
    unavailable_path = os.path.join(args.out, "unavailable.txt")
    lock = open(os.path.join(args.cache, ".lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        pkg, pkg_version, deb, deb_sha = obtain_kernel(args.cache, args.kernel_package)
    except Unavailable as e:
        for name in ("image.json", "vmlinux", "initramfs.cpio"):
            remove(os.path.join(args.out, name))
        write_atomic(unavailable_path, f"{e}\n".encode())
        log(f"microVM image unavailable: {e} (wrote {unavailable_path})")
        return 0
    sde = os.environ.get("SOURCE_DATE_EPOCH", "")
    if sde and not sde.isdigit():
        raise BuildError(f"SOURCE_DATE_EPOCH={sde!r} is not a number of seconds")
    inputs = {
        "builder_sha256": sha256_file(os.path.abspath(__file__)),
        "kernel_package": pkg, "kernel_package_version": pkg_version, "kernel_deb_sha256": deb_sha,
        "agent_sha256": sha256_bytes(agent),
        "extras": [[d, sha256_bytes(b), oct(m)] for d, b, m in extras],
        "source_date_epoch": sde, "cmdline": CMDLINE, "schema": SCHEMA,
    }
    inputs_sha = sha256_bytes(json.dumps(inputs, sort_keys=True).encode())
    try:
        old = json.load(open(manifest_path))
    except (OSError, ValueError):
        old = None
    if old and not args.reextract and old.get("inputs_sha256") == inputs_sha and outputs_match(args.out, old):
        remove(unavailable_path)
        log(f"up to date ({pkg} {pkg_version}, digest {old['digest']}; {time.monotonic() - t0:.2f} s)")
        return 0

    # Rebuild: the manifest goes first, so no reader pairs it with new files.
    remove(manifest_path)
    log(f"building from {os.path.basename(deb)}")
    kver, vmlinux, modules, builtin, absent, epoch = kernel_parts(
        args.cache, deb, deb_sha, pkg, inputs["builder_sha256"], args.reextract)
    mtime = int(sde) if sde else epoch
    cpio = initramfs(agent, modules, extras, mtime)
    vmlinux_sha, cpio_sha = sha256_bytes(vmlinux), sha256_bytes(cpio)
    manifest = {
        "schema": SCHEMA,
        "kernel_package": pkg,
        "kernel_package_version": pkg_version,
        "kernel_deb_sha256": deb_sha,
        "kernel_version": kver,
        "vmlinux": "vmlinux",
        "vmlinux_sha256": vmlinux_sha,
        "vmlinux_size": len(vmlinux),
        "initramfs": "initramfs.cpio",
        "initramfs_sha256": cpio_sha,
        "initramfs_size": len(cpio),
        "agent_sha256": sha256_bytes(agent),
        "extras": [{"dest": d, "sha256": sha256_bytes(b), "mode": f"{m:04o}"} for d, b, m in extras],
        "modules": [n for n, _ in modules],
        "modules_builtin": builtin,
        "modules_absent": absent,
        "mtime": mtime,
        "cmdline": CMDLINE,
        "digest": "sha256:" + sha256_bytes((vmlinux_sha + cpio_sha + CMDLINE).encode()),
        "inputs_sha256": inputs_sha,
    }
    write_atomic(os.path.join(args.out, "vmlinux"), vmlinux)
    write_atomic(os.path.join(args.out, "initramfs.cpio"), cpio)
    write_atomic(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode())
    remove(unavailable_path)
    log(f"built {kver}: vmlinux {len(vmlinux) / 1e6:.1f} MB, initramfs {len(cpio) / 1e6:.2f} MB, "
        f"modules {' '.join(manifest['modules']) or '(none)'}; {manifest['digest']} "
        f"({time.monotonic() - t0:.2f} s)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", required=True, help="static x86-64 ELF, becomes /init")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--cache", required=True, help="kernel .deb cache (kept between builds)")
    ap.add_argument("--extra", action="append", default=[], metavar="SRC:DEST",
                    help="add the file SRC as DEST in the initramfs (repeatable)")
    ap.add_argument("--kernel-package", help="use this kernel package instead of the newest 6.12 (testing)")
    ap.add_argument("--reextract", action="store_true",
                    help="extract the kernel from the .deb again, ignoring the extracted copy in --cache")
    args = ap.parse_args(argv)
    args.out, args.cache = os.path.abspath(args.out), os.path.abspath(args.cache)
    try:
        return build(args)
    except BuildError as e:
        print(f"build_image: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
