#!/usr/bin/env python3
"""slated's log lines for the journal: when $JOURNAL_STREAM names its
stderr (device:inode, as systemd sets it), every line starts with the syslog
priority of its level ("<6>" info, "<4>" warn) and has no timestamp of its
own; when JOURNAL_STREAM names another file, or is unset, lines keep the
"HH:MM:SS.mmm LEVEL module" form.  A warning is provoked with a malformed
NVMe/TCP PDU (the target logs the protocol violation at warn).

usage: journal.py SLATED WORKDIR
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time


def run(slated, work, name, stream_of):
    d = os.path.join(work, name)
    os.makedirs(d)
    cfg = os.path.join(d, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"config": [
            {"method": "nvmf_subsystem_create", "params": {"nqn": "nqn.2026-12.io.slate:j"}},
            {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}]}, f)
    errpath = os.path.join(d, "stderr")
    err = open(errpath, "w")
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)
    if stream_of:
        st = os.stat(stream_of(errpath))
        env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
    rpc = os.path.join(d, "slated.sock")
    p = subprocess.Popen([slated, "-c", cfg, "-s", d, "-r", rpc, "-m", "1"], env=env,
                         stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        if " ready: " not in p.stdout.readline():
            raise SystemExit("%s: slated did not start" % name)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(rpc)
        c.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "nvmf_listener_list"}\n')
        port = json.loads(c.makefile().readline())["result"][0]["port"]
        c.close()
        # A PDU of an undefined type (0x7f): a protocol violation, logged at warn.
        t = socket.create_connection(("127.0.0.1", port), timeout=10)
        t.sendall(bytes([0x7F, 0, 8, 0, 8, 0, 0, 0]))
        try:
            t.recv(4096)  # the C2HTermReq, or the close
        except OSError:
            pass
        t.close()
        for _ in range(100):  # the warning is logged by a reactor: wait for it
            if "protocol violation" in open(errpath).read():
                break
            time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    text = open(errpath).read()
    print("--- %s ---\n%s" % (name, text))
    return [l for l in text.splitlines() if l.strip()]


def main():
    slated, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    stamp = re.compile(r"^\d\d:\d\d:\d\d\.\d\d\d (INFO |WARN |ERR  |DEBUG) ")
    other = os.path.join(work, "other")
    open(other, "w").close()

    lines = run(slated, work, "journal", lambda e: e)
    info = [l for l in lines if l.startswith("<6>")]
    warn = [l for l in lines if l.startswith("<4>") and "protocol violation" in l]
    bad = [l for l in lines if not re.match(r"^<[3467]>\S", l) or stamp.search(l[3:])]
    if not info or not warn or bad:
        raise SystemExit("journal mode: info %d, warn %d, malformed %r" % (len(info), len(warn), bad))

    for name, f in (("other-stream", lambda e: other), ("no-stream", None)):
        lines = run(slated, work, name, f)
        bad = [l for l in lines if not stamp.match(l)]
        warn = [l for l in lines if " WARN " in l and "protocol violation" in l]
        if bad or not warn:
            raise SystemExit("%s: lines without timestamp/level %r, warn %d" % (name, bad, len(warn)))
    print("ok")


main()
