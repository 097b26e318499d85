#!/bin/bash
# tests/limits/tls.sh — the NVMe/TCP secure channel (TLS 1.3 with PSKs)
# against a live slated, with slate-perf (OpenSSL client) and openssl
# s_client as hosts:
#  - slate-perf over TLS writes and reads with --verify (every read checked)
#    on a tls=required listener, with a SHA-256 key (TLS_AES_128_GCM_SHA256)
#    and a SHA-384 one (TLS_AES_256_GCM_SHA384);
#  - openssl s_client completes the handshake with the identity and TLS PSK
#    tls_psk.py derives in Python (the derivation checked independently of
#    slated's OpenSSL code);
#  - refused: a wrong PSK, another host's identity, a host without a key, a
#    Connect naming another host than the PSK identity's (the key binds), a
#    plain client on tls=required, a TLS client on tls=none; tls=allowed
#    takes both; a connection that stalls in the handshake is closed by the
#    login timeout;
#  - the discovery log's TREQ/TSAS per listener; keys never in the log,
#    config_save leaves them out unless include_secrets=true, and keeps the
#    listeners' tls;
#  - a live reload that changes a host's key and a listener's tls.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

SUB=nqn.2026-12.io.slate:tls
H1=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
H2=nqn.2014-08.org.nvmexpress:uuid:66666666-7777-8888-9999-000000000000
H3=nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee
K1=$("$here/tls_psk.py" key 55aa55aa000102030405060708090a0b0c0d0e0f101112131415161718191a1b 1)
K2=$("$here/tls_psk.py" key 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f 2)
KX=$("$here/tls_psk.py" key ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100 1)
LOGIN_MS=2000
logdir=$SLATE_LOGDIR/limits
mkdir -p "$logdir"
state=$(mktemp -d /tmp/slate-tls.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/tls-slated.log
: >"$log"
write_cfg() { # K1-KEY TLS-OF-THE-FIRST-LISTENER
	cat >"$state/slate.json" <<JSON
{"options": {"login_timeout_ms": $LOGIN_MS},
 "config": [
  {"method": "namespace_create", "params": {"name": "t0", "backend": "mem", "size": "16M", "block_size": 512}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$SUB"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$SUB", "host": "$H1", "tls_psk": "$1"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$SUB", "host": "$H2", "tls_psk": "$K2"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$SUB", "host": "$H3"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$SUB", "nsid": 1, "namespace": "t0"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $2, "tls": "required"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $3, "tls": "allowed"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $4}}
]}
JSON
}
write_cfg "$K1" 0 0 0
if ! slate_start "$state/run" "$state/slate.json" 0 "$log"; then
	slate_result FAIL tls.start "$log" "slated did not start"
	exit 1
fi
read -r PR PA PN <<<"$SLATE_NVME_PORTS"
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }
perf() { # NAME PORT HOST [slate-perf args] -> output in $state/NAME.out; status of slate-perf
	local name=$1 port=$2 host=$3
	shift 3
	timeout 30 "${SLATE_PERF:-$SLATE_BUILD/tools/slate-perf/slate-perf}" -a 127.0.0.1 -p "$port" -n "$SUB" --hostnqn "$host" \
		-v "$@" >"$state/$name.out" 2>&1
}
check() { # NAME EXPECT(ok|fail) PORT HOST [slate-perf args]
	local name=$1 want=$2 got=fail
	shift 2
	perf "$name" "$@" -d 0.5 && got=ok
	if [ "$got" = "$want" ]; then
		slate_result PASS "tls.$name"
	else
		slate_result FAIL "tls.$name" "$state/$name.out" "slate-perf ${got}ed, expected $want"
		cp "$state/$name.out" "$logdir/tls-$name.out"
	fi
}

# Data over TLS, every read checked, both cipher suites.
for k in sha256:H1:K1:TLS_AES_128_GCM_SHA256 sha384:H2:K2:TLS_AES_256_GCM_SHA384; do
	IFS=: read -r n h key suite <<<"$k"
	if perf "verify_$n" "$PR" "${!h}" --tls-psk "${!key}" -M 50 -q 16 -d 1.5 --verify &&
		grep -q "TLS 1.3, $suite" "$state/verify_$n.out" &&
		grep -q 'verify: [1-9][0-9]* blocks read back' "$state/verify_$n.out" &&
		grep -q 'errors 0)' "$state/verify_$n.out"; then
		slate_result PASS "tls.verify_$n"
	else
		slate_result FAIL "tls.verify_$n" "$state/verify_$n.out" "no verified TLS run with $suite"
		cp "$state/verify_$n.out" "$logdir/tls-verify_$n.out"
	fi
done

# openssl s_client with the identity and PSK derived in Python.
IFS=$'\t' read -r ID PSK SUITE < <("$here/tls_psk.py" psk "$K1" "$H1" "$SUB")
sc() { # PSK-HEX -> s_client output
	echo | timeout 10 openssl s_client -connect "127.0.0.1:$PR" -tls1_3 -psk_identity "$ID" \
		-psk "$1" -ciphersuites "$SUITE" 2>&1
}
sc "$PSK" >"$state/sclient.out"
BAD=$(echo "$PSK" | sed 's/^./0/;t;s/^/0/')
[ "$BAD" = "$PSK" ] && BAD=1${PSK#?}
sc "$BAD" >"$state/sclient-bad.out"
if grep -q "Cipher is $SUITE" "$state/sclient.out" && ! grep -q "Cipher is $SUITE" "$state/sclient-bad.out"; then
	slate_result PASS tls.openssl_s_client
else
	slate_result FAIL tls.openssl_s_client "$state/sclient.out" "s_client with the Python-derived PSK: no handshake (or one with a wrong PSK)"
	cp "$state/sclient.out" "$state/sclient-bad.out" "$logdir/" 2>/dev/null
fi

# Refusals, and what each listener takes.
check wrong_psk fail "$PR" "$H1" --tls-psk "$KX"
check other_identity fail "$PR" "$H1" --tls-psk "$K1" --tls-identity "NVMe0R01 $H2 $SUB"
check host_without_key fail "$PR" "$H3" --tls-psk "$K1"
# H1's key and identity, then a Connect as H3 (allowed, but not with H1's key).
check identity_binds_host fail "$PR" "$H3" --tls-psk "$K1" --tls-identity "NVMe0R01 $H1 $SUB"
check identity_as_is ok "$PR" "$H3" --tls-psk "$K1" --tls-identity "NVMe0R01 $H1 $SUB" --hostnqn "$H1"
check plain_on_required fail "$PR" "$H1"
check allowed_tls ok "$PA" "$H1" --tls-psk "$K1"
check allowed_plain ok "$PA" "$H3"
check none_plain ok "$PN" "$H3"
check tls_on_none fail "$PN" "$H1" --tls-psk "$K1"

# A handshake that stalls (half a ClientHello) is closed by the login timeout.
out=$(python3 - "$PR" "$LOGIN_MS" <<'PY' 2>&1
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]))  # record header + a byte of ClientHello
t0 = time.monotonic()
s.settimeout(int(sys.argv[2]) / 1000.0 + 10)
try:
    while s.recv(4096):
        pass
except ConnectionResetError:
    pass
except socket.timeout:
    print("still open"); sys.exit(1)
print("%.1f" % (time.monotonic() - t0))
PY
)
if [ "$out" != "still open" ] && awk -v t="$out" -v l="$LOGIN_MS" 'BEGIN { exit !(t + 0.3 >= l / 1000.0 && t < l / 1000.0 + 5) }'; then
	slate_result PASS tls.handshake_timeout
else
	slate_result FAIL tls.handshake_timeout "$log" "stalled handshake: $out (login timeout ${LOGIN_MS} ms)"
fi

# Discovery log: TREQ 1/2 and SECTYPE 2 (TLS 1.3) on the TLS listeners, 0/0 on the plain one.
python3 "$here/tls_disc.py" "$PN" >"$state/disc.out" 2>&1
if grep -q "^$PR 1 2 " "$state/disc.out" && grep -q "^$PA 2 2 " "$state/disc.out" &&
	grep -q "^$PN 0 0 " "$state/disc.out"; then
	slate_result PASS tls.discovery_treq
else
	slate_result FAIL tls.discovery_treq "$state/disc.out" "TREQ/TSAS not as the listeners' tls"
fi

# Keys: never in the log; config_save without them unless asked; listeners keep tls.
ctl config_save path="$state/run/saved.json" >/dev/null
ctl config_save path="$state/run/saved-secrets.json" include_secrets=true >/dev/null
b64_1=$(echo "$K1" | cut -d: -f3) b64_2=$(echo "$K2" | cut -d: -f3)
if grep -q -e "$b64_1" -e "$b64_2" -e "${PSK:0:16}" "$log"; then
	slate_result FAIL tls.no_key_in_log "$log" "a TLS key is in the log"
else
	slate_result PASS tls.no_key_in_log
fi
if grep -q -e "$b64_1" -e "$b64_2" "$state/run/saved.json" || ! grep -q "$b64_1" "$state/run/saved-secrets.json" ||
	! grep -q "$b64_2" "$state/run/saved-secrets.json" || ! grep -q '"tls": "required"' "$state/run/saved.json" ||
	! grep -q '"tls": "allowed"' "$state/run/saved.json"; then
	slate_result FAIL tls.config_save "$state/run/saved.json" "keys where not asked for, missing where asked, or a listener's tls lost"
else
	slate_result PASS tls.config_save
fi

# A bad key is refused without being echoed.
ctl nvmf_subsystem_add_host nqn="$SUB" host="$H3" tls_psk="NVMeTLSkey-1:01:${b64_1%????}AAAA:" >"$state/badkey.out" 2>&1
if grep -q "not a valid" "$state/badkey.out" && ! grep -q "${b64_1:0:20}" "$state/badkey.out"; then
	slate_result PASS tls.bad_key_refused
else
	slate_result FAIL tls.bad_key_refused "$state/badkey.out" "a key with a wrong CRC was taken, or echoed"
fi

# Live reload: H1's key changes (old refused, new taken); the plain listener becomes tls=required.
write_cfg "$KX" "$PR" "$PA" "$PN"
sed -i "s|\"port\": $PN}|\"port\": $PN, \"tls\": \"required\"}|" "$state/slate.json"
ctl config_reload >"$state/reload.out" 2>&1
ok=1
perf reload_old "$PR" "$H1" --tls-psk "$K1" -d 0.5 && ok=0
perf reload_new "$PR" "$H1" --tls-psk "$KX" -d 0.5 || ok=0
perf reload_plain "$PN" "$H3" -d 0.5 && ok=0
perf reload_lis "$PN" "$H1" --tls-psk "$KX" -d 0.5 || ok=0
if [ $ok = 1 ] && ! grep -q -e "${b64_1:0:20}" -e "$(echo "$KX" | cut -d: -f3 | cut -c1-20)" "$state/reload.out"; then
	slate_result PASS tls.reload
else
	slate_result FAIL tls.reload "$state/reload.out" "after the reload: old key refused / new key / plain refused / TLS on the changed listener not all as expected"
fi

if ! slate_alive || ! slate_sanitizer_clean "$log"; then
	slate_result FAIL tls.clean "$log" "slated died or sanitizer report"
else
	slate_result PASS tls.clean
fi
