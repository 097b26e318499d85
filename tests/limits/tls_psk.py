#!/usr/bin/env python3
"""NVMe/TCP TLS PSK helper for the tests, written from the definitions (TCP
transport 1.0c 3.6.1.3, RFC 5869, RFC 8446 7.1) with Python's own hmac and
hashlib, independent of slated's OpenSSL code:

  tls_psk.py key HEX [HASH]          -> "NVMeTLSkey-1:HH:<base64(key + CRC-32 LE)>:"
  tls_psk.py psk KEY HOSTNQN SUBNQN  -> "<identity>\\t<TLS PSK hex>\\t<cipher suite>"

retained = HKDF-Expand-Label(HKDF-Extract(0, configured), "HostNQN", hostnqn, L)
           (the configured key itself for hash 00)
identity = "NVMe0R0C <hostnqn> <subnqn>" (C: the key's hash, or 1/2 by length for 00)
TLS PSK  = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk", identity, L)
"""
import base64
import hashlib
import hmac
import struct
import sys
import zlib


def expand_label(md, key, label, context, length):
    prk = hmac.new(b"\0" * md().digest_size, key, md).digest()
    full = b"tls13 " + label
    info = struct.pack(">H", length) + bytes([len(full)]) + full + bytes([len(context)]) + context
    out, t, i = b"", b"", 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), md).digest()
        out += t
        i += 1
    return out[:length]


def parse(key):
    pre, h, b64, tail = key.split(":")
    assert pre == "NVMeTLSkey-1" and tail == "", key
    raw = base64.b64decode(b64)
    k, crc = raw[:-4], raw[-4:]
    assert struct.pack("<I", zlib.crc32(k)) == crc, "bad CRC"
    return int(h), k


def main():
    if sys.argv[1] == "key":
        k = bytes.fromhex(sys.argv[2])
        h = int(sys.argv[3]) if len(sys.argv) > 3 else 1
        b = base64.b64encode(k + struct.pack("<I", zlib.crc32(k))).decode()
        print("NVMeTLSkey-1:%02d:%s:" % (h, b))
        return
    h, k = parse(sys.argv[2])
    host, sub = sys.argv[3].encode(), sys.argv[4].encode()
    cipher = h if h else (1 if len(k) == 32 else 2)
    mds = {1: hashlib.sha256, 2: hashlib.sha384}
    retained = expand_label(mds[h], k, b"HostNQN", host, len(k)) if h else k
    ident = b"NVMe0R%02d %s %s" % (cipher, host, sub)
    psk = expand_label(mds[cipher], retained, b"nvme-tls-psk", ident, len(k))
    suite = "TLS_AES_128_GCM_SHA256" if cipher == 1 else "TLS_AES_256_GCM_SHA384"
    print("%s\t%s\t%s" % (ident.decode(), psk.hex(), suite))


main()
