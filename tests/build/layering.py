#!/usr/bin/env python3
"""The build enforces the module layering (DESIGN.md "Layout"); this checks it.

1. Every module-private header (the four internal headers, and any header
   under src/ that carries the guard) fails to compile outside its module
   with its own #error, and compiles when the module's SLATE_MODULE_<NAME>
   macro is defined (so the failure is the guard's and not, say, a missing
   path).
2. No module library refers to a symbol that only a module above it (or
   beside it) defines: calls point downward only.

Usage (from tests/meson.build):
  layering.py SRCROOT CC... -- NAME=LIBPATH...
Prints one line per check and exits non-zero if any failed.
"""
import os
import re
import subprocess
import sys
import tempfile

# Headers that must be private (header -> the module macro that admits it);
# any other header under src/ guarded the same way is checked too.
REQUIRED = {
    "scsi/internal.h": "SLATE_MODULE_SCSI",
    "nvme/internal.h": "SLATE_MODULE_NVME",
    "iscsi/internal.h": "SLATE_MODULE_ISCSI",
    "nvmf/tcp_internal.h": "SLATE_MODULE_NVMF",
}
GUARD = re.compile(r'^#ifndef (SLATE_MODULE_[A-Z]+)\n#error "[^"]* is private to', re.M)


def private_headers(srcroot):
    found = dict(REQUIRED)
    src = os.path.join(srcroot, "src")
    for d, _, files in os.walk(src):
        for f in files:
            if f.endswith(".h"):
                path = os.path.join(d, f)
                m = GUARD.search(open(path, encoding="utf-8").read())
                if m:
                    found[os.path.relpath(path, src)] = m.group(1)
    return found

# Module -> the modules it may call (everything below it; core and the
# backends share one level: backends complete requests through the core).
BELOW = {
    "rt": set(),
    "backend": {"rt", "core"},
    "core": {"rt", "backend"},
    "scsi": {"rt", "backend", "core"},
    "nvme": {"rt", "backend", "core"},
    "iscsi": {"rt", "backend", "core", "scsi"},
    "nvmf": {"rt", "backend", "core", "nvme"},
    "mgmt": {"rt", "backend", "core", "scsi", "nvme", "iscsi", "nvmf"},
}


def compile_probe(cc, srcroot, header, defines):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "probe.c")
        with open(src, "w") as f:
            f.write('#include "%s"\nint layering_probe;\n' % header)
        cmd = cc + ["-fsyntax-only", "-D_GNU_SOURCE",
                    "-I" + os.path.join(srcroot, "include"),
                    "-I" + os.path.join(srcroot, "src")] + \
            ["-D" + x for x in defines] + [src]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def nm(path, undefined):
    flag = "--undefined-only" if undefined else "--defined-only"
    out = subprocess.run(["nm", "-g", flag, path], capture_output=True, text=True,
                         check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            syms.add(parts[-1])
    return syms


def main():
    args = sys.argv[1:]
    srcroot = args[0]
    sep = args.index("--")
    cc = args[1:sep]
    libs = dict(a.split("=", 1) for a in args[sep + 1:])
    bad = 0

    for header, macro in sorted(private_headers(srcroot).items()):
        rc, out = compile_probe(cc, srcroot, header, [])
        if rc == 0 or "is private to" not in out:
            print("FAIL private header %s compiles outside its module" % header)
            print(out)
            bad += 1
        else:
            print("PASS private header %s refused outside its module" % header)
        rc, out = compile_probe(cc, srcroot, header, [macro])
        if rc != 0:
            print("FAIL private header %s does not compile with %s" % (header, macro))
            print(out)
            bad += 1

    defined = {m: nm(p, False) for m, p in libs.items()}
    for m, p in libs.items():
        before = bad
        for sym in sorted(nm(p, True)):
            if sym in defined[m]:
                continue
            owners = [o for o, s in defined.items() if sym in s and o != m]
            wrong = [o for o in owners if o not in BELOW[m]]
            if owners and len(wrong) == len(owners):
                print("FAIL module %s calls %s of module %s (above or beside it)" %
                      (m, sym, ", ".join(wrong)))
                bad += 1
        if bad == before:
            print("PASS module %s calls only modules below it" % m)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
