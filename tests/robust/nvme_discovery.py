#!/usr/bin/env python3
"""Discovery log over NVMe/TCP: every entry names the port slated listens on.

Usage: nvme_discovery.py PORT HOSTNQN SUBNQN

A raw NVMe/TCP host (no digests) connects to the discovery subsystem on
127.0.0.1:PORT, enables the controller and reads the Discovery Log Page
(NVMe Base 2.0 5.16.1.23, TCP Transport 3.6).  It checks that the log lists
SUBNQN, and that every entry's TRSVCID is PORT: slated was configured with
port 0, so PORT is the one it reported and the log must carry that, never 0.
Prints "PASS discovery-port" or a reason and exits non-zero.
"""
import socket
import struct
import sys

DISC_NQN = b"nqn.2014-08.org.nvmexpress.discovery"
LOG_LEN = 4096  # header + 3 entries: enough for the robust config


def main():
    port, hostnqn, subnqn = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)

    def recvn(n):
        b = b""
        while len(b) < n:
            r = s.recv(n - len(b))
            if not r:
                sys.exit("connection closed early")
            b += r
        return b

    def capsule(sqe, data=b""):
        hlen = 72
        s.sendall(bytes([4, 0, hlen, hlen if data else 0]) +
                  struct.pack("<I", hlen + len(data)) + sqe + data)

    def response(buf):
        """Read PDUs until the command completes; C2HData lands in buf."""
        while True:
            ch = recvn(8)
            rest = recvn(struct.unpack_from("<I", ch, 4)[0] - 8)
            if ch[0] == 7:  # C2HData
                datao, datal = struct.unpack_from("<II", rest, 4)
                pdo = ch[3]
                buf[datao:datao + datal] = rest[pdo - 8:pdo - 8 + datal]
                if ch[1] & 0x08:  # SUCCESS: no CapsuleResp follows
                    return 0
            elif ch[0] == 5:  # CapsuleResp
                return struct.unpack_from("<H", rest, 14)[0] >> 1
            else:
                sys.exit("unexpected PDU type %d" % ch[0])

    ic = bytearray(128)
    ic[2] = 128
    ic[4] = 128  # ICReq, PFV 0, no digests
    s.sendall(ic)
    if recvn(128)[0] != 1:
        sys.exit("no ICResp")

    # Fabrics Connect to the discovery subsystem (admin queue).
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[4] = 0x7f, 0x40, 0x01
    struct.pack_into("<I", sqe, 32, 1024)
    sqe[39] = 0x01  # in-capsule data block
    struct.pack_into("<HHB", sqe, 42, 0, 31, 0)
    data = bytearray(1024)
    data[0:16] = bytes(range(16))
    struct.pack_into("<H", data, 16, 0xffff)
    data[256:256 + len(DISC_NQN)] = DISC_NQN
    data[512:512 + len(hostnqn)] = hostnqn
    capsule(bytes(sqe), bytes(data))
    st = response(bytearray())
    if st:
        sys.exit("Connect failed: status 0x%x" % st)

    # Property Set CC.EN = 1.
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[2], sqe[4] = 0x7f, 0x40, 1, 0x00
    sqe[39] = 0x5a  # no data: an empty transport data block
    struct.pack_into("<I", sqe, 44, 0x14)
    struct.pack_into("<Q", sqe, 48, 1)
    capsule(bytes(sqe))
    st = response(bytearray())
    if st:
        sys.exit("Property Set CC failed: status 0x%x" % st)

    # Get Log Page 70h into a transport data block.
    sqe = bytearray(64)
    sqe[0], sqe[1], sqe[2] = 0x02, 0x40, 2
    struct.pack_into("<I", sqe, 32, LOG_LEN)
    sqe[39] = 0x5a  # transport SGL data block
    struct.pack_into("<I", sqe, 40, 0x70 | ((LOG_LEN // 4 - 1) << 16))
    capsule(bytes(sqe))
    log = bytearray(LOG_LEN)
    st = response(log)
    if st:
        sys.exit("Get Log Page failed: status 0x%x" % st)

    numrec = struct.unpack_from("<Q", log, 8)[0]
    if not 1 <= numrec <= 3:
        sys.exit("discovery log holds %d records" % numrec)
    found = False
    for i in range(numrec):
        e = log[1024 * (i + 1):1024 * (i + 2)]
        svc = e[32:64].rstrip(b"\0 ").decode()
        nqn = e[256:512].rstrip(b"\0").decode()
        addr = e[512:768].rstrip(b"\0 ").decode()
        print("entry %d: %s at %s port %s" % (i, nqn, addr, svc))
        if svc != str(port):
            sys.exit("entry %d (%s) reports port %r, slated listens on %d" % (i, nqn, svc, port))
        found |= nqn == subnqn
    if not found:
        sys.exit("%s missing from the discovery log" % subnqn)
    print("PASS discovery-port")


if __name__ == "__main__":
    main()
