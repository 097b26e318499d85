#!/usr/bin/env python3
"""A raw iSCSI login with CHAP, for the digests libiscsi does not offer.

Usage: chap_login.py PORT TARGET_IQN USER SECRET ALG [MUTUAL_USER MUTUAL_SECRET]

Logs in to 127.0.0.1:PORT offering only CHAP_A=ALG (6 SHA-1, 7 SHA-256,
8 SHA3-256), answers the target's challenge, and with MUTUAL_* challenges
the target and checks its answer.  Exits 0 once in full feature phase,
else prints why and exits 1.
"""
import hashlib
import os
import socket
import struct
import sys

ALGS = {5: "md5", 6: "sha1", 7: "sha256", 8: "sha3_256"}


def recvn(s, n):
    b = b""
    while len(b) < n:
        r = s.recv(n - len(b))
        if not r:
            sys.exit("connection closed")
        b += r
    return b


def login(s, csg, nsg, transit, keys, itt):
    data = b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in keys)
    bhs = bytearray(48)
    bhs[0] = 0x43
    bhs[1] = (0x80 if transit else 0) | (csg << 2) | nsg
    bhs[5:8] = len(data).to_bytes(3, "big")
    bhs[8:14] = b"\x40\x00\x01\x37\x00\x02"
    struct.pack_into(">IHHI", bhs, 16, itt, 0, 0, itt)
    s.sendall(bytes(bhs) + data + b"\0" * (-len(data) % 4))
    rsp = recvn(s, 48)
    dsl = int.from_bytes(rsp[5:8], "big")
    text = recvn(s, dsl + (-dsl % 4))[:dsl]
    if rsp[36] or rsp[37]:
        sys.exit("login status %d/%d" % (rsp[36], rsp[37]))
    kv = dict(p.split("=", 1) for p in text.decode().split("\0") if "=" in p)
    return rsp, kv


def main():
    port, iqn, user, secret, alg = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    muser = sys.argv[6] if len(sys.argv) > 7 else None
    msecret = sys.argv[7] if len(sys.argv) > 7 else None
    h = lambda *parts: hashlib.new(ALGS[alg], b"".join(parts)).digest()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    base = [("InitiatorName", "iqn.2026-12.io.slate:chap-test"), ("SessionType", "Normal"),
            ("TargetName", iqn)]
    _, kv = login(s, 0, 1, False, base + [("AuthMethod", "CHAP")], 1)
    if kv.get("AuthMethod") != "CHAP":
        sys.exit("AuthMethod answer %r" % kv.get("AuthMethod"))
    _, kv = login(s, 0, 1, False, [("CHAP_A", str(alg))], 2)
    if kv.get("CHAP_A") != str(alg):
        sys.exit("CHAP_A answer %r" % kv.get("CHAP_A"))
    cid, chal = int(kv["CHAP_I"]), bytes.fromhex(kv["CHAP_C"][2:])
    keys = [("CHAP_N", user), ("CHAP_R", "0x" + h(bytes([cid]), secret.encode(), chal).hex())]
    mychal, myid = os.urandom(24), 77
    if muser:
        keys += [("CHAP_I", str(myid)), ("CHAP_C", "0x" + mychal.hex())]
    rsp, kv = login(s, 0, 1, True, keys, 3)
    if muser:
        want = "0x" + h(bytes([myid]), msecret.encode(), mychal).hex()
        if kv.get("CHAP_N") != muser or kv.get("CHAP_R", "").lower() != want:
            sys.exit("the target's mutual answer is wrong: %r" % kv)
    if not rsp[1] & 0x80:
        sys.exit("the target did not leave the security stage")
    rsp, kv = login(s, 1, 3, True, [("HeaderDigest", "None"), ("DataDigest", "None")], 4)
    if rsp[1] & 0x83 != 0x83:
        sys.exit("not in full feature phase (flags 0x%02x)" % rsp[1])


if __name__ == "__main__":
    main()
