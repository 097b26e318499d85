#!/usr/bin/env python3
"""Large transfers from several connections at once, with slated's memory watched.

Usage:
  bigxfer.py load PID IPORT IQN NPORT NQN CONNS DEPTH SIZE POOL_MIB CONN_MIB
  bigxfer.py idle PID IPORT IQN NPORT NQN CONNS

load: CONNS iSCSI sessions and CONNS NVMe/TCP I/O queues each put DEPTH
commands of SIZE bytes in flight at once (WRITE(16) / NVMe Write, then
READ(16) / NVMe Read of the same blocks), every connection in its own
thread; then a VERIFY(16) BYTCHK=1 / NVMe Compare of a whole range, equal and
with one byte off.  Each command has its own LBA range: iSCSI connection i, command k
uses range (i * DEPTH + k), NVMe ranges follow the iSCSI ones.  Data is
checked byte for byte.  While the commands run, slated's VmRSS (pid PID) is
sampled; the test fails if a command fails, if the data read differs from
the data written, or if any sample exceeds the bound

  RSS before + the blocks written (the mem namespace) + POOL_MIB (every
  reactor's large-buffer pool) + CONN_MIB per connection (its fixed cost)

-- with one buffer per command slot sized for the largest transfer, the
commands' buffers alone would exceed it by about (commands - pool) * SIZE.  The second command of a
connection is sent before the first one's data: its buffer may have to wait
while the first one's Data-Out / H2CData is still to come behind it.  Odd
iSCSI connections negotiate ImmediateData=Yes and InitialR2T=No and send
the first burst (immediate data, then unsolicited Data-Out) with each
command, so a command that has to wait for its buffer has data already
received in its slot buffer, to be moved over when the buffer comes.

idle: open CONNS logged-in iSCSI sessions and CONNS NVMe/TCP controllers
(admin + one I/O queue), print slated's VmRSS in KiB, close them.

Prints PASS lines or a reason and exits non-zero.
"""
import os
import socket
import struct
import sys
import threading
import time

HOSTNQN = b"nqn.2014-08.org.nvmexpress:uuid:5a7e5a7e-0000-4000-8000-00000000b16b"
TIMEOUT = 120


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        r = s.recv(min(n - len(b), 1 << 20))
        if not r:
            raise EOFError("connection closed by the target")
        b += r
    return bytes(b)


def pattern(tag, size):
    """SIZE bytes that differ per command and per 4 KiB (misplaced data shows)."""
    base = (tag.to_bytes(4, "little") * 1024)
    out = bytearray(size)
    for off in range(0, size, 4096):
        out[off:off + 4096] = base
        struct.pack_into("<II", out, off, tag, off)
    return bytes(out)


# ---------------------------------------------------------------- iSCSI

class Iscsi:
    def __init__(self, port, iqn, idx, unsolicited=False):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.itt = 1
        self.cmdsn = 1
        self.statsn = 0
        self.idx = idx
        self.mrdsl = 8192
        self.unsol = unsolicited
        self.neg = {}
        self.login(iqn)
        self.immediate = self.neg.get(b"ImmediateData") == b"Yes"
        self.first_burst = 0
        if self.neg.get(b"InitialR2T") == b"No":
            self.first_burst = int(self.neg.get(b"FirstBurstLength", b"65536"))
        if unsolicited and not (self.immediate and self.first_burst):
            raise RuntimeError("target refused ImmediateData=Yes / InitialR2T=No: %r" % self.neg)

    def send(self, bhs, data=b""):
        pad = (-len(data)) % 4
        self.s.sendall(bytes(bhs) + data + b"\0" * pad)

    def recv(self):
        bhs = recvn(self.s, 48)
        ahs = bhs[4] * 4
        dsl = int.from_bytes(bhs[5:8], "big")
        if ahs:
            recvn(self.s, ahs)
        data = recvn(self.s, dsl + ((-dsl) % 4))[:dsl] if dsl else b""
        return bhs, data

    def login(self, iqn):
        keys = [b"InitiatorName=iqn.2024-01.org.slate:bigxfer-%d" % self.idx,
                b"SessionType=Normal", b"TargetName=" + iqn.encode(), b"AuthMethod=None"]
        yn = (b"No", b"Yes") if self.unsol else (b"Yes", b"No")
        op = [b"HeaderDigest=None", b"DataDigest=None", b"MaxRecvDataSegmentLength=262144",
              b"InitialR2T=" + yn[0], b"ImmediateData=" + yn[1], b"MaxBurstLength=1048576",
              b"FirstBurstLength=262144", b"MaxConnections=1", b"ErrorRecoveryLevel=0",
              b"MaxOutstandingR2T=1"]
        isid = bytes([0x80, 0, 0, 0x2b, 0x16, self.idx & 0xff])
        stage, tsih = 0, 0
        for _ in range(6):
            text = b"\0".join(keys if stage == 0 else (op if stage == 1 else [])) + b"\0"
            if stage == 2:
                text = b""
            flags = 0x80 | (stage and (1 << 2) | 3 or 1)
            bhs = bytearray(48)
            bhs[0], bhs[1] = 0x43, flags
            bhs[5:8] = len(text).to_bytes(3, "big")
            bhs[8:14] = isid
            struct.pack_into(">HI", bhs, 14, tsih, 0)
            struct.pack_into(">HHII", bhs, 20, 1, 0, self.cmdsn, self.statsn)
            self.send(bhs, text)
            r, data = self.recv()
            if r[0] & 0x3f != 0x23 or r[36] != 0:
                raise RuntimeError("iSCSI login refused (class %d)" % r[36])
            tsih = struct.unpack_from(">H", r, 14)[0]
            self.statsn = struct.unpack_from(">I", r, 24)[0] + 1
            for kv in data.split(b"\0"):
                if b"=" in kv:
                    k, v = kv.split(b"=", 1)
                    self.neg[k] = v
                if kv.startswith(b"MaxRecvDataSegmentLength="):
                    self.mrdsl = int(kv.split(b"=")[1])
            if r[1] & 0x80 and r[1] & 3 == 3:
                self.cmdsn = struct.unpack_from(">I", r, 28)[0]  # ExpCmdSN
                return
            stage = 1 if (r[1] & 0x80 and r[1] & 3 == 1) else (2 if stage == 1 else stage)
        raise RuntimeError("iSCSI login did not complete")

    def clear_ua(self):
        """TEST UNIT READY until GOOD: a new nexus first sees POWER ON OCCURRED."""
        for _ in range(3):
            itt = self.cmd(bytes(16), 0, None)
            if self.run({itt: (None, None)})[itt] == 0:
                return
        raise RuntimeError("TEST UNIT READY does not succeed")

    def cmd(self, cdb, edtl, write, data=None):
        """Send a command; with data (a write) and unsolicited data negotiated, its first burst."""
        itt = self.itt
        self.itt += 1
        bhs = bytearray(48)
        bhs[0] = 0x01
        bhs[1] = 0x80 | (0 if write is None else 0x20 if write else 0x40) | 1
        struct.pack_into(">IIII", bhs, 16, itt, edtl, self.cmdsn, self.statsn)
        bhs[32:48] = cdb
        self.cmdsn += 1
        imm = b""
        if data is not None and self.unsol:
            imm = data[:min(self.mrdsl, self.first_burst, 65536)]
            bhs[5:8] = len(imm).to_bytes(3, "big")
        self.send(bhs, imm)
        if data is not None and self.unsol:
            # Unsolicited Data-Out (TTT ffffffff) for the rest of the first burst.
            self.data_out(itt, 0xffffffff, len(imm), min(self.first_burst, len(data)) - len(imm),
                          data)
        return itt

    def data_out(self, itt, ttt, off, length, data):
        if length <= 0:
            return
        sn, end = 0, off + length
        while off < end:
            n = min(self.mrdsl, end - off)
            bhs = bytearray(48)
            bhs[0] = 0x05
            bhs[1] = 0x80 if off + n == end else 0
            bhs[5:8] = n.to_bytes(3, "big")
            struct.pack_into(">II", bhs, 16, itt, ttt)
            struct.pack_into(">I", bhs, 28, self.statsn)
            struct.pack_into(">II", bhs, 36, sn, off)
            self.send(bhs, data[off:off + n])
            sn += 1
            off += n

    def run(self, cmds):
        """cmds: {itt: (write_data or None, read_buf or None)}; returns {itt: status}."""
        status = {}
        while len(status) < len(cmds):
            r, data = self.recv()
            op = r[0] & 0x3f
            itt = struct.unpack_from(">I", r, 16)[0]
            if op == 0x31:  # R2T
                ttt, off, length = struct.unpack_from(">I", r, 20)[0], *struct.unpack_from(">II", r, 40)
                self.data_out(itt, ttt, off, length, cmds[itt][0])
            elif op == 0x25:  # Data-In
                off = struct.unpack_from(">I", r, 40)[0]
                cmds[itt][1][off:off + len(data)] = data
                if r[1] & 0x01:
                    status[itt] = r[3]
                    self.statsn = struct.unpack_from(">I", r, 24)[0] + 1
            elif op == 0x21:  # SCSI Response
                status[itt] = r[3] if r[2] == 0 else 0x100 | r[2]
                self.statsn = struct.unpack_from(">I", r, 24)[0] + 1
            elif op == 0x20:  # NOP-In: answer a ping
                if struct.unpack_from(">I", r, 20)[0] != 0xffffffff:
                    bhs = bytearray(r)
                    bhs[0], bhs[1] = 0x40 | 0x40, 0x80
                    bhs[4:8] = b"\0\0\0\0"
                    struct.pack_into(">I", bhs, 16, 0xffffffff)
                    self.send(bhs)
            else:
                raise RuntimeError("unexpected iSCSI opcode 0x%02x" % op)
        return status


def cdb16(op, lba, nlb):
    return bytes([op, 0]) + lba.to_bytes(8, "big") + nlb.to_bytes(4, "big") + b"\0\0"


def iscsi_worker(port, iqn, idx, depth, size, first_range, errors):
    try:
        c = Iscsi(port, iqn, idx, unsolicited=bool(idx & 1))
        c.clear_ua()
        nlb = size // 512
        cmds, datas = {}, {}
        for k in range(depth):
            rng = first_range + k
            d = pattern(rng, size)
            itt = c.cmd(cdb16(0x8a, rng * nlb, nlb), size, True, d)
            cmds[itt] = (d, None)
            datas[itt] = (rng, d)
        st = c.run(cmds)
        bad = {i: s for i, s in st.items() if s}
        if bad:
            raise RuntimeError("WRITE(16) status %s" % bad)
        cmds = {}
        reads = {}
        for itt, (rng, d) in datas.items():
            buf = bytearray(size)
            ritt = c.cmd(cdb16(0x88, rng * nlb, nlb), size, False)
            cmds[ritt] = (None, buf)
            reads[ritt] = (rng, d, buf)
        st = c.run(cmds)
        bad = {i: s for i, s in st.items() if s}
        if bad:
            raise RuntimeError("READ(16) status %s" % bad)
        for ritt, (rng, d, buf) in reads.items():
            if bytes(buf) != d:
                raise RuntimeError("iSCSI range %d: data read differs from data written" % rng)
        # VERIFY(16) BYTCHK=1 of the whole first range: equal, then one byte off.
        rng, d = datas[min(datas)]
        bad = bytearray(d)
        bad[size - 3] ^= 0x5a
        for data, want in ((d, 0), (bytes(bad), 2)):
            cdb = bytearray(cdb16(0x8f, rng * nlb, nlb))
            cdb[1] = 0x02
            itt = c.cmd(bytes(cdb), size, True, data)
            st = c.run({itt: (data, None)})[itt]
            if st != want:
                raise RuntimeError("VERIFY(16) BYTCHK=1 status %d, expected %d" % (st, want))
        c.s.close()
    except Exception as e:  # reported by the main thread
        errors.append("iSCSI connection %d: %s" % (idx, e))


# ---------------------------------------------------------------- NVMe/TCP

class NvmeQ:
    def __init__(self, port, nqn, qid, cntlid):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        ic = bytearray(128)
        ic[0], ic[2] = 0, 128
        struct.pack_into("<I", ic, 4, 128)
        self.s.sendall(ic)
        r = recvn(self.s, 128)
        if r[0] != 1:
            raise RuntimeError("no ICResp")
        self.maxh2c = struct.unpack_from("<I", r, 12)[0]
        self.cid = 1
        sqe = bytearray(64)
        sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x01
        struct.pack_into("<I", sqe, 32, 1024)
        sqe[39] = 0x01
        struct.pack_into("<HHB", sqe, 42, qid, 31, 0)  # QID, SQSIZE 32, CATTR
        data = bytearray(1024)
        data[0:16] = bytes(range(16))
        struct.pack_into("<H", data, 16, cntlid)
        data[256:256 + len(nqn)] = nqn.encode()
        data[512:512 + len(HOSTNQN)] = HOSTNQN
        st, dw0 = self.sync(sqe, bytes(data))
        if st:
            raise RuntimeError("Connect qid %d: status 0x%x" % (qid, st))
        self.cntlid = dw0 & 0xffff

    def capsule(self, sqe, data=b""):
        hlen = 72
        struct.pack_into("<H", sqe, 2, self.cid)
        self.cid += 1
        self.s.sendall(bytes([4, 0, hlen, hlen if data else 0]) +
                       struct.pack("<I", hlen + len(data)) + bytes(sqe) + data)
        return self.cid - 1

    def pdu(self):
        ch = recvn(self.s, 8)
        rest = recvn(self.s, struct.unpack_from("<I", ch, 4)[0] - 8)
        return ch, rest

    def sync(self, sqe, data=b""):
        self.capsule(sqe, data)
        ch, rest = self.pdu()
        if ch[0] != 5:
            raise RuntimeError("unexpected PDU type %d" % ch[0])
        return struct.unpack_from("<H", rest, 14)[0] >> 1, struct.unpack_from("<I", rest, 0)[0]

    def h2c(self, cid, ttag, off, length, data):
        end = off + length
        while off < end:
            n = min(self.maxh2c, end - off)
            hdr = bytearray(24)
            hdr[0], hdr[1], hdr[2], hdr[3] = 6, 0x04 if off + n == end else 0, 24, 24
            struct.pack_into("<IHHII", hdr, 4, 24 + n, cid, ttag, off, n)
            self.s.sendall(bytes(hdr) + data[off:off + n])
            off += n

    def run(self, cmds):
        status = {}
        while len(status) < len(cmds):
            ch, rest = self.pdu()
            if ch[0] == 9:  # R2T
                cid, ttag, off, length = struct.unpack_from("<HHII", rest, 0)
                self.h2c(cid, ttag, off, length, cmds[cid][0])
            elif ch[0] == 7:  # C2HData
                cid, _, off, n = struct.unpack_from("<HHII", rest, 0)
                pdo = ch[3]
                cmds[cid][1][off:off + n] = rest[pdo - 8:pdo - 8 + n]
                if ch[1] & 0x08:
                    status[cid] = 0
            elif ch[0] == 5:
                cid = struct.unpack_from("<H", rest, 12)[0]
                status[cid] = struct.unpack_from("<H", rest, 14)[0] >> 1
            else:
                raise RuntimeError("unexpected PDU type %d" % ch[0])
        return status


def rw_sqe(opc, lba, nlb, size):
    sqe = bytearray(64)
    sqe[0], sqe[1] = opc, 0x40
    struct.pack_into("<I", sqe, 4, 1)
    struct.pack_into("<I", sqe, 32, size)
    sqe[39] = 0x5a
    struct.pack_into("<QI", sqe, 40, lba, nlb - 1)
    return sqe


def nvme_connect(port, nqn):
    adm = NvmeQ(port, nqn, 0, 0xffff)
    sqe = bytearray(64)  # Property Set CC.EN = 1
    sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x00
    sqe[39] = 0x5a
    struct.pack_into("<I", sqe, 44, 0x14)
    struct.pack_into("<Q", sqe, 48, (6 << 16) | (4 << 20) | 1)
    st, _ = adm.sync(sqe)
    if st:
        raise RuntimeError("Property Set CC: status 0x%x" % st)
    io = NvmeQ(port, nqn, 1, adm.cntlid)
    return adm, io


def nvme_worker(port, nqn, idx, depth, size, first_range, errors):
    try:
        adm, q = nvme_connect(port, nqn)
        nlb = size // 512
        cmds, datas = {}, {}
        for k in range(depth):
            rng = first_range + k
            d = pattern(rng, size)
            cid = q.capsule(rw_sqe(0x01, rng * nlb, nlb, size))
            cmds[cid] = (d, None)
            datas[cid] = (rng, d)
        st = q.run(cmds)
        if any(st.values()):
            raise RuntimeError("Write status %s" % st)
        cmds, reads = {}, {}
        for cid, (rng, d) in datas.items():
            buf = bytearray(size)
            rcid = q.capsule(rw_sqe(0x02, rng * nlb, nlb, size))
            cmds[rcid] = (None, buf)
            reads[rcid] = (rng, d, buf)
        st = q.run(cmds)
        if any(st.values()):
            raise RuntimeError("Read status %s" % st)
        for rcid, (rng, d, buf) in reads.items():
            if bytes(buf) != d:
                raise RuntimeError("NVMe range %d: data read differs from data written" % rng)
        # Compare of the whole first range: equal, then one byte off (Compare Failure 285h).
        rng, d = datas[min(datas)]
        bad = bytearray(d)
        bad[size - 3] ^= 0x5a
        for data, want in ((d, 0), (bytes(bad), 0x285)):
            cid = q.capsule(rw_sqe(0x05, rng * nlb, nlb, size))
            st = q.run({cid: (data, None)})[cid] & 0x7ff
            if st != want:
                raise RuntimeError("Compare status 0x%x, expected 0x%x" % (st, want))
        q.s.close()
        adm.s.close()
    except Exception as e:
        errors.append("NVMe/TCP queue %d: %s" % (idx, e))


def main():
    mode = sys.argv[1]
    pid, iport, iqn, nport, nqn, conns = (int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                          int(sys.argv[5]), sys.argv[6], int(sys.argv[7]))
    if mode == "idle":
        held = [Iscsi(iport, iqn, i) for i in range(conns)]
        held += [q for i in range(conns) for q in nvme_connect(nport, nqn)]
        time.sleep(0.5)
        print(rss_kib(pid))
        for c in held:
            c.s.close()
        return
    depth, size = int(sys.argv[8]), int(sys.argv[9])
    pool_kib, conn_kib = int(sys.argv[10]) * 1024, int(sys.argv[11]) * 1024
    errors, threads = [], []
    for i in range(conns):
        threads.append(threading.Thread(target=iscsi_worker,
                                        args=(iport, iqn, i, depth, size, i * depth, errors)))
        threads.append(threading.Thread(target=nvme_worker,
                                        args=(nport, nqn, i, depth, size,
                                              (conns + i) * depth, errors)))
    rss0 = rss_kib(pid)
    written_kib = 2 * conns * depth * size // 1024
    nconn = 3 * conns  # iSCSI sessions, NVMe admin and I/O queues
    bound = rss0 + written_kib + pool_kib + nconn * conn_kib
    for t in threads:
        t.start()
    peak = rss0
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_kib(pid))
        time.sleep(0.01)
    for t in threads:
        t.join()
    print("slated VmRSS: %d KiB before, %d KiB at most while %d commands of %d bytes ran; "
          "bound %d KiB = %d before + %d written + %d pool + %d x %d per connection"
          % (rss0, peak, 2 * conns * depth * 2, size, bound, rss0, written_kib, pool_kib,
             nconn, conn_kib))
    for e in errors:
        print("FAIL", e)
    if errors:
        sys.exit(1)
    if peak > bound:
        print("FAIL memory: slated's RSS reached %d KiB, above the bound of %d KiB" % (peak, bound))
        sys.exit(1)
    print("PASS bigxfer: %d connections x %d commands of %d bytes on each transport, data checked"
          % (conns, depth, size))


if __name__ == "__main__":
    main()
