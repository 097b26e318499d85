#!/usr/bin/env python3
"""The RPC socket's clients: idle ones go, stalled ones go, slatectl gets in.

Usage: rpc_idle.py SOCKET SLATECTL IDLE_MS

Against a slated whose options.rpc_idle_timeout_ms is IDLE_MS:
 - crowd: 40 silent clients connected at once (more than the 32 slots) do
   not lock slatectl out: `slatectl daemon_status` answers within 10 s;
 - idle: a silent client is closed after IDLE_MS (not before);
 - busy: a client sending a request every 0.5 s is still served after
   IDLE_MS + 1 s;
 - dribble: a client sending one byte of a request every 0.5 s is closed
   10 s after its first byte (the request deadline), not before.
Prints one "PASS limits.rpc_NAME" / "FAIL limits.rpc_NAME (why)" line each.
"""
import socket
import subprocess
import sys
import time

from idle import report, run_all, wait_closed

EARLY = 0.2
LATE = 3.0  # the server looks at its clients once a second
DEADLINE = 10.0


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def crowd(path, ctl, idle, res):
    socks = [connect(path) for _ in range(40)]
    time.sleep(0.3)
    try:
        r = subprocess.run([ctl, "-s", path, "daemon_status"], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        res["crowd"] = "slatectl daemon_status hung with 40 idle clients"
        return
    res["crowd"] = None if r.returncode == 0 else "slatectl failed with 40 idle clients: %s" % (
        r.stdout + r.stderr).decode(errors="replace").strip()[:200]
    for s in socks:
        s.close()


def idle_case(path, ctl, idle, res):
    s = connect(path)
    t0 = time.monotonic()
    took = wait_closed(s, t0 + idle + LATE)
    if took is None:
        res["idle"] = "an idle client still connected %.1f s after the %.1f s timeout" % (LATE, idle)
    elif took < idle - EARLY:
        res["idle"] = "an idle client closed after %.2f s, before the %.1f s timeout" % (took, idle)
    else:
        res["idle"] = None


def busy(path, ctl, idle, res):
    s = connect(path)
    end = time.monotonic() + idle + 1
    n = 0
    try:
        while time.monotonic() < end:
            s.sendall(b'{"jsonrpc": "2.0", "id": %d, "method": "daemon_status"}\n' % n)
            s.settimeout(5)
            buf = b""
            while b"\n" not in buf:
                r = s.recv(65536)
                if not r:
                    raise OSError("closed")
                buf += r
            n += 1
            time.sleep(0.5)
        res["busy"] = None
    except OSError as e:
        res["busy"] = "a client asking every 0.5 s was dropped after %d requests: %s" % (n, e)


def dribble(path, ctl, idle, res):
    s = connect(path)
    req = b'{"jsonrpc": "2.0", "id": 1, "method": "daemon_status", "params": {' + b" " * 200
    t0 = time.monotonic()
    try:
        for i, b in enumerate(req):
            s.sendall(bytes([b]))
            s.settimeout(0.5)
            try:
                if not s.recv(4096):
                    break
            except socket.timeout:
                continue
    except OSError:
        pass
    took = time.monotonic() - t0
    if took < DEADLINE - EARLY:
        res["dribble"] = "a dribbling request was cut after %.2f s, before the %.0f s deadline" % (
            took, DEADLINE)
    elif took > DEADLINE + LATE:
        res["dribble"] = "a dribbling request still connected after %.1f s" % took
    else:
        res["dribble"] = None


def main():
    path, ctl, idle = sys.argv[1], sys.argv[2], int(sys.argv[3]) / 1000.0
    res = {}
    crowd(path, ctl, idle, res)
    run_all([(c, (path, ctl, idle, res)) for c in (idle_case, busy, dribble)])
    bad = report(("crowd", "idle", "busy", "dribble"), res, "limits.rpc_")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
