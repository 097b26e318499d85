# tests/e2e/cross.d/89-tls.sh — sourced by tests/e2e/cross-linux.sh.
# NVMe/TCP TLS listeners as the Linux host sees them (Debian 12 has no
# tlshd, so the kernel cannot run the TLS handshake itself; slate-perf and
# openssl s_client prove the TLS data path in tests/limits/tls.sh):
#  - nvme discover shows the tls=required listener with TREQ "required" and
#    SECTYPE TLS 1.3, the tls=allowed one "not required" and TLS 1.3;
#  - the kernel's plain NVMe/TCP host is refused on tls=required and
#    connects, reads and disconnects on tls=allowed.

TLS_REQ_PORT=4431
TLS_ALW_PORT=4432
tls_setup() {
	ctl nvmf_listener_add addr=127.0.0.1 port=$TLS_REQ_PORT tls=required >/dev/null &&
		ctl nvmf_listener_add addr=127.0.0.1 port=$TLS_ALW_PORT tls=allowed >/dev/null
}
tls_discover() {
	nvme discover -t tcp -a 127.0.0.1 -s "$PORT" >"$state/tls-disc.txt" 2>&1 || return 1
	python3 - "$state/tls-disc.txt" "$TLS_REQ_PORT" "$TLS_ALW_PORT" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
entries = [dict(re.findall(r"^(\w+):\s*(.*?)\s*$", e, re.M)) for e in text.split("=====Discovery Log Entry")[1:]]
seen = {}
for e in entries:
    seen.setdefault(e.get("trsvcid"), []).append((e.get("treq", ""), e.get("sectype", "")))
print(seen.get(sys.argv[2]), seen.get(sys.argv[3]))
ok = all(t.startswith("required") and "tls" in s.lower() for t, s in seen.get(sys.argv[2], [("", "")]))
ok &= all(t.startswith("not required") and "tls" in s.lower() for t, s in seen.get(sys.argv[3], [("", "")]))
sys.exit(0 if ok else 1)
PY
}
tls_plain_refused() {
	if timeout 30 nvme connect -t tcp -a 127.0.0.1 -s $TLS_REQ_PORT -n "$XNQN" >"$state/tls-conn.txt" 2>&1; then
		echo "plain connect to tls=required succeeded"
		return 1
	fi
	cat "$state/tls-conn.txt"
	grep -q "TLS handshake failed" "$log"
}
tls_plain_allowed() {
	timeout 30 nvme connect -t tcp -a 127.0.0.1 -s $TLS_ALW_PORT -n "$XNQN" || return 1
	wait_for 10 sh -c "nvme list-subsys 2>&1 | grep -q 'trsvcid=$TLS_ALW_PORT'" || return 1
	nvme list-subsys 2>&1 | grep "trsvcid=$TLS_ALW_PORT"
	dd if="$NVDEV" of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null
}
check tls-setup tls_setup
check tls-discover-treq tls_discover
check tls-plain-refused-on-required tls_plain_refused
check tls-plain-on-allowed tls_plain_allowed
# drop the extra path, the parts after this one expect the original host only
nvme disconnect -n "$XNQN" >/dev/null 2>&1
nv_reconnect >/dev/null 2>&1
