#!/usr/bin/env python3
"""A raw iSCSI initiator for the ACL tests (tests/limits/acl.sh).

Usage: acl_client.py PORT INITIATOR TARGET|discovery [--chap USER:SECRET] ACTION...

Logs in to 127.0.0.1:PORT as INITIATOR (one-way CHAP with MD5 when --chap
is given) to TARGET, or opens a discovery session, then runs each ACTION
and prints one line per action:
  luns        REPORT LUNS (to LUN 0)          -> "luns 0,2" ("luns -" if none)
  tur:N       TEST UNIT READY to LUN N        -> "tur N ok" or "tur N KEY/ASC/ASCQ" (hex)
  inq:N       standard INQUIRY to LUN N       -> "inq N pq=Q type=T"
  st:WHAT     Text SendTargets=WHAT           -> "st NAME,NAME" ("st -" if none)
  run:CMD     a shell command (a live change between two commands of one session) -> "run"
A refused login prints "login CLASS/DETAIL" and exits 3; other failures exit 1.
"""
import hashlib
import socket
import struct
import subprocess
import sys


class Session:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.itt = 0
        self.cmdsn = 1
        self.statsn = 0

    def recvn(self, n):
        b = b""
        while len(b) < n:
            r = self.s.recv(n - len(b))
            if not r:
                sys.exit("connection closed")
            b += r
        return b

    def send(self, bhs, data=b""):
        bhs[5:8] = len(data).to_bytes(3, "big")
        self.s.sendall(bytes(bhs) + data + b"\0" * (-len(data) % 4))

    def recv(self):
        while True:
            h = self.recvn(48)
            ahs = h[4] * 4
            dsl = int.from_bytes(h[5:8], "big")
            self.recvn(ahs)
            data = self.recvn(dsl + (-dsl % 4))[:dsl]
            op = h[0] & 0x3F
            if op == 0x20:  # NOP-In: answer a ping, ignore the rest
                ttt = h[20:24]
                if ttt != b"\xff\xff\xff\xff":
                    o = bytearray(48)
                    o[0] = 0x40
                    o[1] = 0x80
                    o[8:16] = h[8:16]
                    o[16:20] = b"\xff\xff\xff\xff"
                    o[20:24] = ttt
                    struct.pack_into(">II", o, 24, self.cmdsn, self.statsn + 1)
                    self.send(o)
                continue
            if op in (0x21, 0x23, 0x24, 0x26) or (op == 0x25 and h[1] & 0x01):
                self.statsn = struct.unpack(">I", h[24:28])[0]
            return h, data

    def next_itt(self):
        self.itt += 1
        return self.itt

    def login_pdu(self, csg, nsg, transit, keys):
        data = b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in keys)
        bhs = bytearray(48)
        bhs[0] = 0x43
        bhs[1] = (0x80 if transit else 0) | (csg << 2) | nsg
        bhs[8:14] = b"\x40\x00\x01\x37\x00\x03"
        struct.pack_into(">IHHII", bhs, 16, self.next_itt(), 0, 0, self.cmdsn, self.statsn + 1 if self.itt > 1 else 0)
        self.send(bhs, data)
        rsp, text = self.recv()
        if rsp[36] or rsp[37]:
            print("login %d/%d" % (rsp[36], rsp[37]))
            sys.exit(3)
        return rsp, dict(p.split("=", 1) for p in text.decode().split("\0") if "=" in p)

    def login(self, initiator, target, chap):
        base = [("InitiatorName", initiator)]
        if target == "discovery":
            base.append(("SessionType", "Discovery"))
        else:
            base += [("SessionType", "Normal"), ("TargetName", target)]
        if chap:
            user, secret = chap.split(":", 1)
            _, kv = self.login_pdu(0, 1, False, base + [("AuthMethod", "CHAP,None")])
            if kv.get("AuthMethod") != "CHAP":
                sys.exit("AuthMethod answer %r" % kv.get("AuthMethod"))
            _, kv = self.login_pdu(0, 1, False, [("CHAP_A", "5")])
            cid, chal = int(kv["CHAP_I"]), bytes.fromhex(kv["CHAP_C"][2:])
            r = hashlib.md5(bytes([cid]) + secret.encode() + chal).hexdigest()
            self.login_pdu(0, 1, True, [("CHAP_N", user), ("CHAP_R", "0x" + r)])
        else:
            self.login_pdu(0, 1, True, base + [("AuthMethod", "None")])
        rsp, _ = self.login_pdu(1, 3, True, [("HeaderDigest", "None"), ("DataDigest", "None"),
                                             ("MaxRecvDataSegmentLength", "65536")])
        if rsp[1] & 0x83 != 0x83:
            sys.exit("not in full feature phase (flags 0x%02x)" % rsp[1])

    def scsi(self, lun, cdb, edtl):
        bhs = bytearray(48)
        bhs[0] = 0x01
        bhs[1] = 0x80 | (0x40 if edtl else 0) | 0x01
        bhs[9] = lun
        struct.pack_into(">IIII", bhs, 16, self.next_itt(), edtl, self.cmdsn, self.statsn + 1)
        bhs[32:32 + len(cdb)] = cdb
        self.cmdsn += 1
        self.send(bhs)
        data = b""
        while True:
            h, d = self.recv()
            op = h[0] & 0x3F
            if op == 0x25:
                data += d
                if h[1] & 0x01:
                    return h[3], data, b""
            elif op == 0x21:
                sense = d[2:2 + int.from_bytes(d[0:2], "big")] if len(d) >= 2 else b""
                return h[3], data, sense
            else:
                sys.exit("unexpected opcode 0x%02x" % op)

    def text(self, key, val):
        bhs = bytearray(48)
        bhs[0] = 0x04
        bhs[1] = 0x80
        struct.pack_into(">IIII", bhs, 16, self.next_itt(), 0xFFFFFFFF, self.cmdsn, self.statsn + 1)
        self.cmdsn += 1
        self.send(bhs, (key + "=" + val).encode() + b"\0")
        h, d = self.recv()
        if h[0] & 0x3F != 0x24 or h[1] & 0x40:
            sys.exit("text response 0x%02x flags 0x%02x" % (h[0], h[1]))
        return [p.split("=", 1)[1] for p in d.decode().split("\0") if p.startswith("TargetName=")]


def sense_str(sense):
    if not sense:
        return "?"
    if sense[0] & 0x7F in (0x72, 0x73):
        return "%x/%02x/%02x" % (sense[1] & 0xF, sense[2], sense[3])
    return "%x/%02x/%02x" % (sense[2] & 0xF, sense[12], sense[13])


def main():
    port, initiator, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    chap = None
    if args[:1] == ["--chap"]:
        chap, args = args[1], args[2:]
    s = Session(port)
    s.login(initiator, target, chap)
    for a in args:
        if a == "luns":
            st, data, sense = s.scsi(0, bytes([0xA0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0]), 4096)
            if st:
                print("luns", sense_str(sense))
                continue
            n = int.from_bytes(data[0:4], "big") // 8
            luns = [data[8 + 8 * i + 1] for i in range(n)]
            print("luns", ",".join(map(str, luns)) or "-")
        elif a.startswith("tur:"):
            lun = int(a[4:])
            st, _, sense = s.scsi(lun, bytes(6), 0)
            print("tur", lun, "ok" if st == 0 else sense_str(sense))
        elif a.startswith("inq:"):
            lun = int(a[4:])
            st, data, sense = s.scsi(lun, bytes([0x12, 0, 0, 0, 96, 0]), 96)
            if st:
                print("inq", lun, sense_str(sense))
            else:
                print("inq %d pq=%d type=%d" % (lun, data[0] >> 5, data[0] & 0x1F))
        elif a.startswith("st:"):
            print("st", ",".join(s.text("SendTargets", a[3:])) or "-")
        elif a.startswith("run:"):
            subprocess.run(a[4:], shell=True, check=False, stdout=subprocess.DEVNULL)
            print("run")
        else:
            sys.exit("unknown action " + a)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
