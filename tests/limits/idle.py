#!/usr/bin/env python3
"""Connections that never finish, or go quiet, are closed by their timeout.

Usage: idle.py ISCSI_PORT NVME_PORT TARGET_IQN LOGIN_MS IDLE_MS

Against a slated started with options login_timeout_ms=LOGIN_MS and
idle_timeout_ms=IDLE_MS, opens one connection per case below at once (in
threads) and waits for the target to close each: a case passes when the
close comes no earlier than its timeout (measured from the last byte we
sent, minus a little for clock granularity) and no later than the timeout
plus a generous grace.  The "kept" cases must still be open and answering
after both timeouts have passed.  Prints one "PASS case" / "FAIL case (why)"
line each; exits non-zero when any failed.
"""
import socket
import struct
import sys
import threading
import time

GRACE = 15.0  # seconds beyond a timeout before "never closed"
EARLY = 0.2   # seconds a close may precede the exact deadline (timer granularity)
DISC_NQN = b"nqn.2014-08.org.nvmexpress.discovery"
HOSTNQN = b"nqn.2014-08.org.nvmexpress:uuid:0badc0de-1111-2222-3333-444444444444"


class Closed(Exception):
    pass


def recvn(s, n):
    b = b""
    while len(b) < n:
        r = s.recv(n - len(b))
        if not r:
            raise Closed()
        b += r
    return b


def wait_closed(s, deadline):
    """Seconds until the peer closed s (EOF or reset), or None at deadline."""
    start = time.monotonic()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            if not s.recv(4096):
                return time.monotonic() - start
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
        except socket.timeout:
            return None


# ---- iSCSI ----
def login_pdu(csg, nsg, transit, keys, itt=1, isid=b"\x40\x00\x01\x37\x00\x00"):
    data = b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in keys)
    bhs = bytearray(48)
    bhs[0] = 0x43  # Login Request, immediate
    bhs[1] = (0x80 if transit else 0) | (csg << 2) | nsg
    bhs[5:8] = len(data).to_bytes(3, "big")
    bhs[8:14] = isid
    struct.pack_into(">I", bhs, 16, itt)
    return bytes(bhs) + data + b"\0" * (-len(data) % 4)


def read_pdu(s):
    bhs = recvn(s, 48)
    dsl = int.from_bytes(bhs[5:8], "big")
    recvn(s, dsl + (-dsl % 4))
    return bhs


def iscsi_login(s, discovery, iqn, isid=b"\x40\x00\x01\x37\x00\x00"):
    keys = [("InitiatorName", "iqn.2026-12.io.slate:limits-test"),
            ("SessionType", "Discovery" if discovery else "Normal"),
            ("HeaderDigest", "None"), ("DataDigest", "None")]
    if not discovery:
        keys.append(("TargetName", iqn))
    s.sendall(login_pdu(1, 3, True, keys, isid=isid))
    bhs = read_pdu(s)
    if bhs[0] & 0x3f != 0x23 or bhs[36] != 0 or not bhs[1] & 0x80 or bhs[1] & 3 != 3:
        raise RuntimeError("login failed: status %d/%d flags 0x%02x" % (bhs[36], bhs[37], bhs[1]))


def nop_out(s, itt):
    bhs = bytearray(48)
    bhs[0] = 0x40  # NOP-Out, immediate
    bhs[1] = 0x80
    struct.pack_into(">I", bhs, 16, itt)
    struct.pack_into(">I", bhs, 20, 0xffffffff)
    s.sendall(bhs)
    if read_pdu(s)[0] & 0x3f != 0x20:
        raise RuntimeError("no NOP-In")


# ---- NVMe/TCP ----
def icreq(s):
    ic = bytearray(128)
    ic[2] = 128
    ic[4] = 128
    s.sendall(ic)
    if recvn(s, 128)[0] != 1:
        raise RuntimeError("no ICResp")


def nvme_connect(s, subnqn, kato_ms):
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x01
    struct.pack_into("<I", sqe, 32, 1024)
    sqe[39] = 0x01
    struct.pack_into("<HHBxI", sqe, 42, 0, 31, 0, kato_ms)
    data = bytearray(1024)
    data[0:16] = bytes(range(16))
    struct.pack_into("<H", data, 16, 0xffff)
    data[256:256 + len(subnqn)] = subnqn
    data[512:512 + len(HOSTNQN)] = HOSTNQN
    s.sendall(bytes([4, 0, 72, 72]) + struct.pack("<I", 72 + 1024) + bytes(sqe) + bytes(data))
    ch = recvn(s, 8)
    rest = recvn(s, struct.unpack_from("<I", ch, 4)[0] - 8)
    if ch[0] != 5 or struct.unpack_from("<H", rest, 14)[0] >> 1:
        raise RuntimeError("Connect failed")


def run_all(calls):
    """Run each (function, args) in its own thread, all at once; wait for all."""
    threads = [threading.Thread(target=f, args=a) for f, a in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def report(names, results, prefix):
    """One PASS/FAIL line per name (results[name]: None or why); the number failed."""
    bad = 0
    for n in names:
        why = results.get(n, "no result (an exception, see its log)")
        print("PASS %s%s" % (prefix, n) if why is None else "FAIL %s%s (%s)" % (prefix, n, why))
        bad += why is not None
    return bad


def main():
    iport, nport, iqn = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    login, idle = int(sys.argv[4]) / 1000.0, int(sys.argv[5]) / 1000.0
    results = {}

    def case(name, port, setup, timeout, keep=False):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            t0 = time.monotonic()
            setup(s)
            if timeout == "idle":
                t0, timeout = time.monotonic(), idle  # idle counts from the last PDU
            if keep:
                time.sleep(max(login, idle) + 2)
                nop_out(s, 0x77)
                results[name] = None
                return
            left = timeout - (time.monotonic() - t0)
            took = wait_closed(s, time.monotonic() + left + GRACE)
            took = None if took is None else took + (timeout - left)
            if took is None:
                results[name] = "still open %.0f s after its %.1f s timeout" % (GRACE, timeout)
            elif took < timeout - EARLY:
                results[name] = "closed after %.2f s, before its %.1f s timeout" % (took, timeout)
            else:
                results[name] = None
        except Exception as e:  # noqa: BLE001 - any failure is this case's
            results[name] = "%s: %s" % (type(e).__name__, e)

    cases = [
        ("iscsi_silent", iport, lambda s: None, login),
        ("iscsi_half_bhs", iport, lambda s: s.sendall(b"\x43\x87" + b"\0" * 18), login),
        ("iscsi_login_midway", iport,
         lambda s: (s.sendall(login_pdu(0, 1, False, [("InitiatorName", "iqn.2026-12.io.slate:x"),
                                                      ("SessionType", "Normal"), ("TargetName", iqn),
                                                      ("AuthMethod", "None")])),
                    read_pdu(s)), login),
        ("iscsi_discovery_idle", iport, lambda s: iscsi_login(s, True, iqn), "idle"),
        ("iscsi_normal_kept", iport, lambda s: iscsi_login(s, False, iqn), None, True),
        ("nvme_silent", nport, lambda s: None, login),
        ("nvme_icreq_only", nport, icreq, login),
        ("nvme_discovery_idle", nport, lambda s: (icreq(s), nvme_connect(s, DISC_NQN, 0)), "idle"),
    ]
    run_all([(case, c) for c in cases])
    bad = report([c[0] for c in cases], results, "limits.")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
