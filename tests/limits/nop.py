#!/usr/bin/env python3
"""iSCSI NOP-In pings (options nop_interval_ms, nop_timeout_ms).

Usage: nop.py ISCSI_PORT TARGET_IQN INTERVAL_MS TIMEOUT_MS

Two logged-in normal sessions, side by side, against a slated running with
the given ping interval and timeout:
 - "answered" replies to every NOP-In with the NOP-Out 11.18 asks for (ITT
   reserved, the TTT echoed) and must see at least two pings, each asking
   for an answer (TTT != ffffffff, ITT == ffffffff), and still be open and
   answering its own ping after timeout + 3 intervals;
 - "ignored" never answers: its first ping must come no earlier than one
   interval of silence after login, and the target must close it no
   earlier than TIMEOUT after that ping (and within a grace after).
Prints "PASS limits.nop_answered" / "FAIL limits.nop_ignored (why)" lines.
"""
import socket
import struct
import sys
import time

from idle import Closed, iscsi_login, read_pdu, report, run_all, wait_closed

GRACE = 5.0
EARLY = 0.2


def is_ping(bhs):
    return bhs[0] & 0x3f == 0x20 and struct.unpack_from(">I", bhs, 20)[0] != 0xffffffff


def answer(s, ping):
    out = bytearray(48)
    out[0], out[1] = 0x40, 0x80  # NOP-Out, immediate, final
    out[8:16] = ping[8:16]  # LUN
    struct.pack_into(">II", out, 16, 0xffffffff, struct.unpack_from(">I", ping, 20)[0])
    struct.pack_into(">II", out, 24, struct.unpack_from(">I", ping, 28)[0],  # CmdSN = ExpCmdSN
                     struct.unpack_from(">I", ping, 24)[0] + 1)  # ExpStatSN
    s.sendall(bytes(out))


def answered(port, iqn, every, tmo, res):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    iscsi_login(s, False, iqn, isid=b"\x40\x00\x01\x38\x00\x01")  # each case its own ISID
    end = time.monotonic() + tmo + 3 * every
    pings = 0
    try:
        while time.monotonic() < end:
            s.settimeout(max(0.05, end - time.monotonic()))
            try:
                bhs = read_pdu(s)
            except socket.timeout:
                break
            if not is_ping(bhs):
                res["answered"] = "unexpected PDU opcode 0x%02x" % bhs[0]
                return
            if struct.unpack_from(">I", bhs, 16)[0] != 0xffffffff:
                res["answered"] = "a ping's ITT is not ffffffff"
                return
            pings += 1
            answer(s, bhs)
        # still open: our own ping is answered
        ping = bytearray(48)
        ping[0], ping[1] = 0x40, 0x80
        struct.pack_into(">II", ping, 16, 0x1234, 0xffffffff)
        s.settimeout(5)
        s.sendall(bytes(ping))
        while True:
            bhs = read_pdu(s)
            if bhs[0] & 0x3f == 0x20 and struct.unpack_from(">I", bhs, 16)[0] == 0x1234:
                break
            if is_ping(bhs):
                answer(s, bhs)
    except (Closed, OSError) as e:
        res["answered"] = "closed although every ping was answered (%d pings): %s" % (pings, e)
        return
    res["answered"] = None if pings >= 2 else "only %d pings in %.1f s" % (pings, tmo + 3 * every)


def ignored(port, iqn, every, tmo, res):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    iscsi_login(s, False, iqn, isid=b"\x40\x00\x01\x38\x00\x02")
    t_login = time.monotonic()
    s.settimeout(every + GRACE)
    try:
        bhs = read_pdu(s)
    except socket.timeout:
        res["ignored"] = "no NOP-In within %.1f s of a quiet session" % (every + GRACE)
        return
    t_ping = time.monotonic()
    if not is_ping(bhs):
        res["ignored"] = "first PDU is opcode 0x%02x, not a NOP-In asking for an answer" % bhs[0]
        return
    if t_ping - t_login < every - EARLY:
        res["ignored"] = "pinged %.2f s after login, interval %.1f s" % (t_ping - t_login, every)
        return
    took = wait_closed(s, t_ping + tmo + GRACE)
    if took is None:
        res["ignored"] = "still open %.1f s after an unanswered ping (timeout %.1f s)" % (
            tmo + GRACE, tmo)
        return
    since = time.monotonic() - t_ping
    if since < tmo - EARLY:
        res["ignored"] = "closed %.2f s after the ping, before the %.1f s timeout" % (since, tmo)
        return
    res["ignored"] = None


def main():
    port, iqn = int(sys.argv[1]), sys.argv[2]
    every, tmo = int(sys.argv[3]) / 1000.0, int(sys.argv[4]) / 1000.0
    res = {}
    cases = [answered, ignored]
    run_all([(c, (port, iqn, every, tmo, res)) for c in cases])
    bad = report([c.__name__ for c in cases], res, "limits.nop_")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
