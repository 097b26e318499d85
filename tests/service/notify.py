#!/usr/bin/env python3
"""The sd_notify protocol as slated speaks it, received on a NOTIFY_SOCKET
of our own (a Unix datagram socket, as systemd creates for Type=notify):
READY=1 arrives only once slated is listening (its ready line is out and
its RPC socket answers), SIGHUP gives RELOADING=1 then READY=1, SIGTERM
gives STOPPING=1 before the exit, and every message carries a STATUS= line.

usage: notify.py SLATED WORKDIR
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys


def main():
    slated, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cfg = os.path.join(work, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"config": [
            {"method": "namespace_create", "params": {"name": "n0", "backend": "mem", "size": "8M"}},
            {"method": "nvmf_subsystem_create", "params": {"nqn": "nqn.2026-12.io.slate:notify"}},
            {"method": "nvmf_ns_attach", "params": {"nqn": "nqn.2026-12.io.slate:notify",
                                                     "namespace": "n0"}},
            {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}]}, f)
    path = os.path.join(work, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(60)
    rpc = os.path.join(work, "slated.sock")
    env = dict(os.environ, NOTIFY_SOCKET=path)
    log = open(os.path.join(work, "slated.log"), "w")
    p = subprocess.Popen([slated, "-c", cfg, "-s", work, "-r", rpc, "-m", "1"], env=env,
                         stdout=subprocess.PIPE, stderr=log, text=True)
    got = []

    def recv(what):
        try:
            m = ns.recv(4096).decode()
        except socket.timeout:
            raise SystemExit("no %s within 60 s; got so far %r" % (what, got))
        got.append(m)
        print("notify:", m.replace("\n", " | "))
        fields = dict(l.split("=", 1) for l in m.splitlines() if "=" in l)
        if "STATUS" not in fields:
            raise SystemExit("message without STATUS=: %r" % m)
        return fields

    try:
        f = recv("READY=1")
        if f.get("READY") != "1":
            raise SystemExit("first message is not READY=1: %r" % got)
        # Ready means serving: the ready line is printed and the RPC socket answers.
        line = p.stdout.readline()
        if " ready: " not in line:
            raise SystemExit("READY=1 before the ready line (%r)" % line)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(rpc)
        c.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "nvmf_listener_list"}\n')
        ans = json.loads(c.makefile().readline())
        c.close()
        port = ans["result"][0]["port"]
        t = socket.create_connection(("127.0.0.1", port), timeout=10)
        t.close()
        print("listener on port", port, "accepts connections")

        p.send_signal(signal.SIGHUP)
        f = recv("RELOADING=1")
        if f.get("RELOADING") != "1":
            raise SystemExit("SIGHUP did not give RELOADING=1: %r" % got)
        f = recv("READY=1 after the reload")
        if f.get("READY") != "1":
            raise SystemExit("no READY=1 after RELOADING=1: %r" % got)

        p.send_signal(signal.SIGTERM)
        f = recv("STOPPING=1")
        if f.get("STOPPING") != "1":
            raise SystemExit("SIGTERM did not give STOPPING=1: %r" % got)
        rc = p.wait(timeout=60)
        if rc != 0:
            raise SystemExit("slated exited with %d after SIGTERM" % rc)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    print("ok:", len(got), "messages")


main()
