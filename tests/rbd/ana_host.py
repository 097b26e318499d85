#!/usr/bin/env python3
"""A raw NVMe/TCP host that reads what NVMe ANA reports (what `nvme ana-log` shows).

Usage: ana_host.py info PORT SUBNQN
       ana_host.py aen PORT SUBNQN
       ana_host.py resv PORT SUBNQN HOST STEP... [+ PORT HOST STEP...]

Connects to SUBNQN on 127.0.0.1:PORT (no digests), enables the controller
and prints one JSON object: Identify Controller's CNTLID, CMIC, OAES, ANATT,
ANACAP, ANAGRPMAX, NANAGRPID, MNAN; NSID 1's ANAGRPID and NGUID; the ANA log
(log 0Ch, NVMe Base 2.0 5.16.1.12) with its NSIDs and with RGO (groups
only); and the status of a one-block Read of NSID 1 on an I/O queue
(0 = success; an inaccessible group answers SCT 3h SC 02h: 0x302).

"aen" first enables the ANA change notice (Set Features 0Bh, bit 11),
posts an Asynchronous Event Request and prints READY on a line of its own;
whoever runs it then changes the group's state on the gateway, and the
JSON has the event's dword 0 ("aen", 0 if none came within 20 s) and the
log and Read status after it.

"resv" is the `nvme resv-*` of host number HOST (its Host Identifier and
NQN end in that byte) on NSID 1 through an I/O queue: each STEP adds one
element to the JSON array it prints; after "+", the next host and port
(one JSON line each, in one process: a python start costs seconds on a
loaded machine).  reg:KEY (Reservation Register 0Dh,
register NRKEY=KEY), acq:KEY:TYPE (Acquire 11h), rel:KEY:TYPE (Release
15h), clr:KEY (Release, Clear), read / write (one block at LBA 0): their
status (0, or SCT<<8|SC; Reservation Conflict is 0x83); report (Reservation
Report 0Eh, extended): {"status", "gen", "rtype", "regs": [[key, holder]]}.
Keys are hex.
"""
import json
import socket
import struct
import sys
import time

HOSTNQN = b"nqn.2014-08.org.nvmexpress:uuid:5a7e5a7e-0000-4000-8000-0000000000a1"
HOSTID = bytes(range(16))


class Queue:
    def __init__(self, port, subnqn, qid, cntlid):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.cid = 0
        ic = bytearray(128)
        ic[2] = 128
        ic[4] = 128  # ICReq, PFV 0, no digests
        self.s.sendall(ic)
        if self.recvn(128)[0] != 1:
            sys.exit("no ICResp")
        sqe = bytearray(64)
        sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x01  # Fabrics Connect
        struct.pack_into("<I", sqe, 32, 1024)
        sqe[39] = 0x01  # in-capsule data block
        struct.pack_into("<HHHBxI", sqe, 40, 0, qid, 31, 0, 0)
        data = bytearray(1024)
        data[0:16] = HOSTID
        struct.pack_into("<H", data, 16, cntlid)
        data[256:256 + len(subnqn)] = subnqn
        data[512:512 + len(HOSTNQN)] = HOSTNQN
        st, dw0 = self.cmd(sqe, bytes(data))
        if st:
            sys.exit("Connect (qid %d) failed: status 0x%x" % (qid, st))
        self.cntlid = dw0 & 0xffff

    def recvn(self, n):
        b = b""
        while len(b) < n:
            r = self.s.recv(n - len(b))
            if not r:
                sys.exit("connection closed early")
            b += r
        return b

    def send(self, sqe, data=b""):
        self.cid += 1
        struct.pack_into("<H", sqe, 2, self.cid)
        if not data and sqe[39] == 0:
            sqe[39] = 0x5a  # transport SGL data block (C2H data, or none)
        hlen = 72
        self.s.sendall(bytes([4, 0, hlen, hlen if data else 0]) +
                       struct.pack("<I", hlen + len(data)) + bytes(sqe) + data)

    def response(self, buf=None):
        """(status without the phase bit, dword 0); C2HData lands in buf."""
        while True:
            ch = self.recvn(8)
            rest = self.recvn(struct.unpack_from("<I", ch, 4)[0] - 8)
            if ch[0] == 7:  # C2HData
                datao, datal = struct.unpack_from("<II", rest, 4)
                pdo = ch[3]
                if buf is not None:
                    buf[datao:datao + datal] = rest[pdo - 8:pdo - 8 + datal]
                if ch[1] & 0x08:  # SUCCESS: no CapsuleResp follows
                    return 0, 0
            elif ch[0] == 5:  # CapsuleResp
                return (struct.unpack_from("<H", rest, 14)[0] >> 1,
                        struct.unpack_from("<I", rest, 0)[0])
            else:
                sys.exit("unexpected PDU type %d" % ch[0])

    def cmd(self, sqe, data=b"", buf=None):
        self.send(sqe, data)
        return self.response(buf)


def admin(q, opc, nsid=0, cdw10=0, cdw11=0, length=0):
    sqe = bytearray(64)
    sqe[0], sqe[1] = opc, 0x40  # SGL
    struct.pack_into("<I", sqe, 4, nsid)
    struct.pack_into("<I", sqe, 32, length)
    struct.pack_into("<II", sqe, 40, cdw10, cdw11)
    buf = bytearray(length)
    st, dw0 = q.cmd(sqe, buf=buf)
    return st, dw0, buf


def ana_log(q, rgo):
    n = 8192
    st, _, b = admin(q, 0x02, 0xffffffff, 0x0c | (0x100 if rgo else 0) | ((n // 4 - 1) << 16),
                     0, n)
    if st:
        return {"status": st}
    chg, ngrps = struct.unpack_from("<QH", b, 0)
    off, groups = 16, []
    for _ in range(ngrps):
        gid, nn, gchg = struct.unpack_from("<IIQ", b, off)
        state = b[off + 16] & 0x0f
        off += 32
        nsids = list(struct.unpack_from("<%dI" % nn, b, off))
        off += 4 * nn
        groups.append({"grpid": gid, "state": state, "chgcnt": gchg, "nsids": nsids})
    return {"status": 0, "chgcnt": chg, "groups": groups}


def read_status(io):
    sqe = bytearray(64)
    sqe[0], sqe[1] = 0x02, 0x40
    struct.pack_into("<I", sqe, 4, 1)
    struct.pack_into("<I", sqe, 32, 512)
    struct.pack_into("<QI", sqe, 40, 0, 0)  # SLBA 0, NLB 0 (one block)
    st, _ = io.cmd(sqe, buf=bytearray(512))
    return st


def io_cmd(io, opc, cdw10=0, cdw11=0, data=b"", buf=None):
    sqe = bytearray(64)
    sqe[0], sqe[1] = opc, 0x40
    struct.pack_into("<I", sqe, 4, 1)
    struct.pack_into("<I", sqe, 32, len(data) if data else len(buf or b""))
    if data:
        sqe[39] = 0x01  # in-capsule data
    struct.pack_into("<II", sqe, 40, cdw10, cdw11)
    st, _ = io.cmd(sqe, data, buf)
    return st


def resv(io, steps, bs):
    out = []
    for step in steps:
        f = step.split(":")
        k = [int(x, 16) for x in f[1:]]
        if f[0] == "reg":
            out.append(io_cmd(io, 0x0d, 0, 0, struct.pack("<QQ", 0, k[0])))
        elif f[0] == "acq":
            out.append(io_cmd(io, 0x11, k[1] << 8, 0, struct.pack("<QQ", k[0], 0)))
        elif f[0] == "rel":
            out.append(io_cmd(io, 0x15, k[1] << 8, 0, struct.pack("<Q", k[0])))
        elif f[0] == "clr":
            out.append(io_cmd(io, 0x15, 1, 0, struct.pack("<Q", k[0])))
        elif f[0] == "read":
            out.append(io_cmd(io, 0x02, 0, 0, buf=bytearray(bs)))
        elif f[0] == "write":
            out.append(io_cmd(io, 0x01, 0, 0, b"\x5a" * bs))
        elif f[0] == "report":
            n = 64 + 64 * 64
            b = bytearray(n)
            st = io_cmd(io, 0x0e, n // 4 - 1, 1, buf=b)
            regs = []
            for i in range(struct.unpack_from("<H", b, 5)[0]):
                e = 64 + 64 * i
                regs.append(["%x" % struct.unpack_from("<Q", b, e + 8)[0], b[e + 2] & 1])
            out.append({"status": st, "gen": struct.unpack_from("<I", b, 0)[0],
                        "rtype": b[4], "regs": regs})
        else:
            sys.exit("unknown step " + step)
    return out


def enable(port, subnqn):
    """An enabled controller's admin queue."""
    q = Queue(port, subnqn, 0, 0xffff)
    sqe = bytearray(64)  # Property Set CC.EN = 1
    sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x00
    struct.pack_into("<I", sqe, 44, 0x14)
    struct.pack_into("<Q", sqe, 48, 0x460001)  # IOCQES 4, IOSQES 6, EN
    if q.cmd(sqe)[0]:
        sys.exit("Property Set CC failed")
    for _ in range(100):  # Property Get CSTS until RDY
        sqe = bytearray(64)
        sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x04
        struct.pack_into("<I", sqe, 44, 0x1c)
        st, dw0 = q.cmd(sqe)
        if not st and dw0 & 1:
            break
        time.sleep(0.05)
    return q


def resv_main(subnqn, args):
    """resv PORT SUBNQN HOST STEP... [+ PORT HOST STEP...]: one JSON line per group."""
    global HOSTNQN, HOSTID
    base = HOSTNQN
    groups, cur = [], []
    for a in args:
        if a == "+":
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    groups.append(cur)
    for g in groups:
        port, host = int(g[0]), int(g[1])
        HOSTID = bytes(range(15)) + bytes([host])
        HOSTNQN = base[:-2] + b"%02x" % host
        q = enable(port, subnqn)
        st, _, idn = admin(q, 0x06, 1, 0, 0, 4096)
        if st:
            sys.exit("Identify Namespace failed: 0x%x" % st)
        lbaf = struct.unpack_from("<I", idn, 128 + 4 * (idn[26] & 0x0f))[0]
        io = Queue(port, subnqn, 1, q.cntlid)
        print(json.dumps(resv(io, g[2:], 1 << ((lbaf >> 16) & 0xff))), flush=True)
        io.s.close()
        q.s.close()


def main():
    mode = sys.argv[1]
    if mode == "resv":
        resv_main(sys.argv[3].encode(), [sys.argv[2]] + sys.argv[4:])
        return
    port, subnqn = int(sys.argv[2]), sys.argv[3].encode()
    q = enable(port, subnqn)
    st, _, idc = admin(q, 0x06, 0, 1, 0, 4096)
    if st:
        sys.exit("Identify Controller failed: 0x%x" % st)
    st, _, idn = admin(q, 0x06, 1, 0, 0, 4096)
    if st:
        sys.exit("Identify Namespace failed: 0x%x" % st)
    out = {
        "cntlid": struct.unpack_from("<H", idc, 78)[0],
        "cmic": idc[76],
        "oaes": struct.unpack_from("<I", idc, 92)[0],
        "anatt": idc[342],
        "anacap": idc[343],
        "anagrpmax": struct.unpack_from("<I", idc, 344)[0],
        "nanagrpid": struct.unpack_from("<I", idc, 348)[0],
        "mnan": struct.unpack_from("<I", idc, 540)[0],
        "nmic": idn[30],
        "anagrpid": struct.unpack_from("<I", idn, 92)[0],
        "nguid": idn[104:120].hex(),
        "nsfeat": idn[24],
        # NAWUN, NAWUPF, NACWU, NABSN, NABO, NABSPF (atomic writes, core/atomic.h)
        "atomic": [struct.unpack_from("<H", idn, o)[0] for o in range(34, 46, 2)],
        "log": ana_log(q, False),
        "log_rgo": ana_log(q, True),
    }
    io = Queue(port, subnqn, 1, q.cntlid)
    out["read_status"] = read_status(io)
    if mode == "aen":
        st, _, _ = admin(q, 0x09, 0, 0x0b, 1 << 11)  # Set Features AEC: ANA change notices
        if st:
            sys.exit("Set Features AEC failed: 0x%x" % st)
        aer = bytearray(64)
        aer[0], aer[1] = 0x0c, 0x40
        q.send(aer)
        print("READY", flush=True)
        q.s.settimeout(20)
        try:
            st, dw0 = q.response()
        except socket.timeout:
            st, dw0 = -1, 0
        out["aen_status"] = st
        out["aen"] = dw0
        q.s.settimeout(10)
        out["log_after"] = ana_log(q, False)
        out["read_status_after"] = read_status(io)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
