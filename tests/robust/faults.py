#!/usr/bin/env python3
"""Fault injection (fault_set / fault_clear / fault_list) against a live slated.

Usage: faults.py SOCK IPORT IQN NPORT NQN NAMESPACE

slated must export NAMESPACE (512-byte blocks, >= 4 MiB) as LUN 0 of IQN and
NSID 1 of NQN (any host admitted), and run ONE reactor (-m 1): the latency
case proves that a delayed request does not hold the reactor up by getting
another connection's read answered while the delayed one still waits.
Hosts are our own clients (tests/robust/bigxfer.py's Iscsi and NvmeQ), so
every status can be checked exactly.  Prints one PASS/FAIL line per case;
exits non-zero if any failed.
"""
import json
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bigxfer  # noqa: E402

SOCK = IPORT = IQN = NPORT = NQN = NS = None
failed = 0


def rpc(method, **params):
    """(result, error) of one JSON-RPC call on the daemon's socket."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(SOCK)
    c.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                          "params": params}).encode() + b"\n")
    r = json.loads(c.makefile().readline())
    c.close()
    return r.get("result"), r.get("error")


def must(method, **params):
    res, err = rpc(method, **params)
    if err:
        raise RuntimeError("%s: %s" % (method, err))
    return res


def iqn_of(idx):
    return "iqn.2024-01.org.slate:bigxfer-%d" % idx


def iscsi(idx):
    c = bigxfer.Iscsi(IPORT, IQN, idx)
    c.clear_ua()
    return c


def iscsi_send(c, op, lba, data=None):
    """One block READ(16) (op 0x88) or WRITE(16) (0x8a); returns its ITT."""
    cdb = bigxfer.cdb16(op, lba, 1)
    if op == 0x8a:
        return c.cmd(cdb, 512, True, data)
    return c.cmd(cdb, 512, False)


def iscsi_wait(c, itt, data=None):
    """(status, sense key, ASC) of command itt."""
    while True:
        r, d = c.recv()
        op = r[0] & 0x3f
        if op == 0x31:  # R2T
            ttt, off, length = struct.unpack_from(">I", r, 20)[0], *struct.unpack_from(">II", r, 40)
            c.data_out(itt, ttt, off, length, data)
        elif op == 0x25:  # Data-In
            if r[1] & 0x01:
                c.statsn = struct.unpack_from(">I", r, 24)[0] + 1
                return r[3], 0, 0
        elif op == 0x21:  # SCSI Response: sense data is a 2-byte length then fixed format
            c.statsn = struct.unpack_from(">I", r, 24)[0] + 1
            sk = asc = 0
            if len(d) >= 2 + 4 and d[2] & 0x7f in (0x72, 0x73):  # descriptor format
                sk, asc = d[2 + 1] & 0x0f, d[2 + 2]
            elif len(d) >= 2 + 14:  # fixed format
                sk, asc = d[2 + 2] & 0x0f, d[2 + 12]
            return r[3], sk, asc
        elif op == 0x20:
            continue
        else:
            raise RuntimeError("unexpected iSCSI opcode 0x%02x" % op)


def iscsi_io(c, op, lba, data=None):
    itt = iscsi_send(c, op, lba, data)
    return iscsi_wait(c, itt, data)


def nvme():
    adm, io = bigxfer.nvme_connect(NPORT, NQN)
    return adm, io


def nvme_io(q, opc, lba, data=None):
    """Status (SCT << 8 | SC) of a one-block Read (2) / Write (1)."""
    cid = q.capsule(bigxfer.rw_sqe(opc, lba, 1, 512))
    st = q.run({cid: (data, bytearray(512))})[cid]
    return st & 0x7ff


def rules():
    return must("fault_list")


def case(name, fn):
    global failed
    try:
        must("fault_clear", all=True)
        why = fn()
    except Exception as e:  # noqa: BLE001 - a case fails with what went wrong
        why = "%s: %s" % (type(e).__name__, e)
    if why:
        failed += 1
        print("FAIL faults.%s (%s)" % (name, why))
    else:
        print("PASS faults.%s" % name)
    sys.stdout.flush()


# ---------------------------------------------------------------- cases

def rpc_errors():
    bad = [
        ("fault_set", {"namespace": NS}, -32602),                     # does nothing
        ("fault_set", {"namespace": NS, "status": "bogus"}, -32602),  # unknown status
        ("fault_set", {"namespace": NS, "status": "ok"}, -32602),     # ok is no fault
        ("fault_set", {"namespace": NS, "status": "medium-error", "ops": "read,frob"}, -32602),
        ("fault_set", {"namespace": NS, "status": "medium-error", "per_mille": 1001}, -32602),
        ("fault_set", {"namespace": NS, "status": "medium-error", "per_mille": 10, "every": 2},
         -32602),
        ("fault_set", {"namespace": NS, "status": "medium-error", "lba_first": 9, "lba_last": 3},
         -32602),
        ("fault_set", {"namespace": NS, "latency_us": 60000001}, -32602),
        ("fault_set", {"drop": True, "status": "aborted"}, -32602),
        ("fault_set", {"drop": True, "namespace": NS}, -32602),
        ("fault_set", {"namespace": NS, "status": "aborted", "after": 3}, -32602),
        ("fault_set", {"namespace": NS, "status": "aborted", "transport": "fc"}, -32602),
        ("fault_set", {"namespace": NS, "status": 5}, -32602),
        ("fault_set", {"namespace": NS, "status": "aborted", "frob": 1}, -32602),
        ("fault_set", {"namespace": "no-such-ns", "status": "aborted"}, -32000),
        ("fault_clear", {}, -32602),
        ("fault_clear", {"id": 1, "all": True}, -32602),
        ("fault_clear", {"id": 4000000}, -32000),
    ]
    for method, params, code in bad:
        res, err = rpc(method, **params)
        if not err or err.get("code") != code:
            return "%s %s: got %s, wanted error %d" % (method, params, err or res, code)
    if rules():
        return "a refused fault_set left a rule: %s" % rules()
    # Statuses by name, '_' or '-' alike, as fault_list shows them.
    rid = must("fault_set", namespace=NS, status="MEDIUM_ERROR", ops="read")["id"]
    lst = rules()
    if len(lst) != 1 or lst[0]["id"] != rid or lst[0]["status"] != "medium-error" or \
            lst[0]["ops"] != "read" or not lst[0]["armed"]:
        return "fault_list after set: %s" % lst
    if must("fault_clear", id=rid) != {"cleared": 1} or rules():
        return "fault_clear id did not remove the rule"
    return None


def iscsi_every_medium_error():
    c = iscsi(1)
    must("fault_set", namespace=NS, transport="iscsi", ops="read", every=2, status="medium-error")
    got = [iscsi_io(c, 0x88, 8 + i) for i in range(6)]
    want = [(0, 0, 0), (2, 3, 0x11)] * 3
    if got != want:
        return "READ(16) results %s, wanted every 2nd CHECK CONDITION MEDIUM ERROR/11h: %s" % (
            got, want)
    w = iscsi_io(c, 0x8a, 8, bytes(512))
    if w != (0, 0, 0):
        return "a WRITE was hit by a read rule: %s" % (w,)
    r = rules()[0]
    if r["seen"] != 6 or r["hits"] != 3:
        return "fault_list seen/hits %d/%d, wanted 6/3" % (r["seen"], r["hits"])
    return None


def nvme_count_not_ready():
    adm, q = nvme()
    must("fault_set", namespace=NS, transport="nvme", ops="read", count=3, status="not-ready")
    got = [nvme_io(q, 0x02, 16 + i) for i in range(5)]
    if got != [0x082, 0x082, 0x082, 0, 0]:
        return "Read statuses %s, wanted 3 x Namespace Not Ready (082h) then success" % [
            hex(x) for x in got]
    r = rules()[0]
    if r["hits"] != 3 or r["armed"]:
        return "fault_list after count reached: %s" % r
    return None


def iscsi_fraction():
    c = iscsi(2)
    must("fault_set", namespace=NS, transport="iscsi", ops="read", per_mille=300, seed=1234,
         status="aborted")
    n, fails = 100, 0
    for i in range(n):
        st = iscsi_io(c, 0x88, i)[0]
        if st == 0x40:  # TASK ABORTED
            fails += 1
        elif st != 0:
            return "read %d: status 0x%x, neither GOOD nor TASK ABORTED" % (i, st)
    r = rules()[0]
    print("  per_mille 300: %d of %d reads failed, target: seen %d hits %d" % (
        fails, n, r["seen"], r["hits"]))
    if not 0 < fails < n:
        return "%d of %d failed: a fraction must fail some and not all" % (fails, n)
    if r["hits"] != fails or r["seen"] != n:
        return "target counted seen %d hits %d, host saw %d of %d" % (r["seen"], r["hits"],
                                                                       fails, n)
    return None


def nvme_range_write_error():
    adm, q = nvme()
    must("fault_set", namespace=NS, transport="nvme", ops="write", lba_first=1000,
         lba_last=1999, status="write-error")
    d = bytes(range(256)) * 2
    got = (nvme_io(q, 0x01, 999, d), nvme_io(q, 0x01, 1000, d), nvme_io(q, 0x01, 1999, d),
           nvme_io(q, 0x01, 2000, d), nvme_io(q, 0x02, 1500))
    if got != (0, 0x280, 0x280, 0, 0):
        return "Write 999/1000/1999/2000, Read 1500: %s, wanted 0, 280h, 280h, 0, 0" % [
            hex(x) for x in got]
    return None


def latency_does_not_block():
    slow, fast = iscsi(3), iscsi(4)
    must("fault_set", host=iqn_of(3), latency_us=1000000, ops="read")
    t0 = time.monotonic()
    itt = iscsi_send(slow, 0x88, 0)
    time.sleep(0.05)  # the slow read reaches the target first (order, not timing, is asserted)
    r = iscsi_io(fast, 0x88, 0)
    if r != (0, 0, 0):
        return "the other host's read: %s" % (r,)
    # One reactor: had the delay blocked it, the other read could not have finished first.
    rd, _, _ = select.select([slow.s], [], [], 0)
    if rd:
        return "the delayed read answered before another host's read"
    s = iscsi_wait(slow, itt)
    el = time.monotonic() - t0
    print("  delayed read took %.3f s (1 s injected)" % el)
    if s != (0, 0, 0):
        return "the delayed read: %s" % (s,)
    if el < 1.0:
        return "the delayed read took %.3f s, less than the 1 s injected" % el
    return None


def iscsi_drop_after():
    c = iscsi(5)
    rid = must("fault_set", drop=True, host=iqn_of(5), after=2)["id"]
    for i in range(2):
        if iscsi_io(c, 0x88, i) != (0, 0, 0):
            return "command %d before the drop failed" % i
    iscsi_send(c, 0x88, 2)
    c.s.settimeout(30)
    try:
        data = c.s.recv(48)
    except ConnectionResetError:
        data = b""
    if data:
        return "the 3rd command was answered instead of the connection dropped"
    r = rules()[0]
    if r["id"] != rid or r["hits"] != 1 or r["armed"]:
        return "fault_list after the drop: %s" % r
    c2 = iscsi(5)  # drop once: the host logs in again and works
    if iscsi_io(c2, 0x88, 0) != (0, 0, 0):
        return "a read after re-login failed"
    return None


def nvme_drop_after():
    adm, q = nvme()
    must("fault_set", drop=True, transport="nvme", host=bigxfer.HOSTNQN.decode(), after=1)
    if nvme_io(q, 0x02, 0) != 0:
        return "the Read before the drop failed"
    q.capsule(bigxfer.rw_sqe(0x02, 0, 1, 512))
    q.s.settimeout(30)
    try:
        data = q.s.recv(8)
    except ConnectionResetError:
        data = b""
    if data:
        return "the 2nd command was answered instead of the connection dropped"
    adm2, q2 = nvme()
    if nvme_io(q2, 0x02, 0) != 0:
        return "a Read after reconnecting failed"
    return None


def cleared():
    c = iscsi(6)
    adm, q = nvme()
    must("fault_set", namespace=NS, status="internal-error")
    if iscsi_io(c, 0x88, 0)[0] != 2 or nvme_io(q, 0x02, 0) != 0x006:
        return "an all-ops rule did not fail both hosts' reads (SCSI CHECK CONDITION, NVMe 006h)"
    res = must("fault_clear", all=True)
    if res != {"cleared": 1} or rules():
        return "fault_clear all: %s, then %s" % (res, rules())
    if iscsi_io(c, 0x88, 0) != (0, 0, 0) or nvme_io(q, 0x02, 0) != 0:
        return "reads still fail after fault_clear"
    return None


def main():
    global SOCK, IPORT, IQN, NPORT, NQN, NS
    SOCK, IPORT, IQN, NPORT, NQN, NS = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        int(sys.argv[4]), sys.argv[5], sys.argv[6]
    case("rpc-errors", rpc_errors)
    case("iscsi-every-2nd-medium-error", iscsi_every_medium_error)
    case("nvme-count-3-not-ready", nvme_count_not_ready)
    case("iscsi-fraction-seeded", iscsi_fraction)
    case("nvme-lba-range-write-error", nvme_range_write_error)
    case("latency-does-not-block-reactor", latency_does_not_block)
    case("iscsi-drop-after-2", iscsi_drop_after)
    case("nvme-drop-after-1", nvme_drop_after)
    case("clear-restores", cleared)
    must("fault_clear", all=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
