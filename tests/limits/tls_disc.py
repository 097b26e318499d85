#!/usr/bin/env python3
"""Read the NVMe discovery log over a plain NVMe/TCP listener and print one
line per entry: "<trsvcid> <treq> <sectype> <subnqn>" (TREQ byte, TSAS byte 0).

  tls_disc.py PORT
"""
import socket
import struct
import sys

DISC_NQN = b"nqn.2014-08.org.nvmexpress.discovery"
HOSTNQN = b"nqn.2014-08.org.nvmexpress:uuid:0badc0de-1111-2222-3333-444444444444"


def recvn(s, n):
    b = b""
    while len(b) < n:
        r = s.recv(n - len(b))
        if not r:
            raise EOFError("closed")
        b += r
    return b


def pdu(s):
    ch = recvn(s, 8)
    return ch, recvn(s, struct.unpack_from("<I", ch, 4)[0] - 8)


def main():
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    icreq = bytearray(128)
    icreq[0:8] = bytes([0, 0, 128, 0]) + struct.pack("<I", 128)
    s.sendall(icreq)
    ch, _ = pdu(s)
    assert ch[0] == 1, "no ICResp"
    # Fabrics Connect, admin queue of the discovery controller, in-capsule data.
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[4] = 0x7F, 0x40, 0x01
    struct.pack_into("<I", sqe, 32, 1024)
    sqe[39] = 0x01
    struct.pack_into("<HHBxI", sqe, 42, 0, 31, 0, 0)
    data = bytearray(1024)
    struct.pack_into("<H", data, 16, 0xFFFF)
    data[256:256 + len(DISC_NQN)] = DISC_NQN
    data[512:512 + len(HOSTNQN)] = HOSTNQN
    s.sendall(bytes([4, 0, 72, 72]) + struct.pack("<I", 72 + 1024) + bytes(sqe) + bytes(data))
    ch, rest = pdu(s)
    assert ch[0] == 5 and not struct.unpack_from("<H", rest, 14)[0] >> 1, "Connect failed"
    # Property Set CC.EN = 1 (admin commands need an enabled controller).
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[4] = 0x7F, 0x40, 0x00
    struct.pack_into("<H", sqe, 2, 1)
    struct.pack_into("<I", sqe, 44, 0x14)
    struct.pack_into("<Q", sqe, 48, 0x460001)
    sqe[39] = 0x5A  # no data: an empty transport data block
    s.sendall(bytes([4, 0, 72, 0]) + struct.pack("<I", 72) + bytes(sqe))
    ch, rest = pdu(s)
    assert ch[0] == 5 and not struct.unpack_from("<H", rest, 14)[0] >> 1, "Property Set failed %s %s" % (ch.hex(), rest.hex())
    # Get Log Page 70h, 16 KiB, into a transport data block (C2HData).
    length = 16384
    sqe = bytearray(64)
    sqe[0], sqe[1] = 0x02, 0x40
    struct.pack_into("<H", sqe, 2, 2)
    struct.pack_into("<I", sqe, 32, length)
    sqe[39] = 0x5A
    struct.pack_into("<I", sqe, 40, 0x70 | ((length // 4 - 1) << 16))
    s.sendall(bytes([4, 0, 72, 0]) + struct.pack("<I", 72) + bytes(sqe))
    log = bytearray(length)
    while True:
        ch, rest = pdu(s)
        if ch[0] == 7:  # C2HData: CCCID, DATAO, DATAL, then data at PDO
            off, dl = struct.unpack_from("<II", rest, 4)
            start = ch[3] - 8
            log[off:off + dl] = rest[start:start + dl]
            continue
        assert ch[0] == 5, "unexpected PDU %d" % ch[0]
        st = struct.unpack_from("<H", rest, 14)[0] >> 1
        assert not st, "Get Log Page failed: status 0x%x" % st
        break
    n = struct.unpack_from("<Q", log, 8)[0]
    for i in range(min(n, length // 1024 - 1)):
        e = log[1024 * (i + 1):1024 * (i + 2)]
        svc = e[32:64].decode().strip()
        sub = e[256:512].split(b"\0")[0].decode()
        print(svc, e[3], e[768], sub)


main()
