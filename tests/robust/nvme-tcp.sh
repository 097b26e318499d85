#!/bin/bash
# tests/robust/nvme-tcp.sh — malformed NVMe/TCP PDUs against a live slated.
#
# Starts slated (build-asan by default) with a temp state dir and a config
# that creates a mem namespace, an NVMe subsystem admitting one host NQN,
# and an NVMe/TCP listener on port 0 (slated picks a free port and logs it);
# then runs nvme-tcp-pdu
# (tests/robust/nvme_tcp_pdu.c) once per case.  Each case checks the
# C2HTermReq (FES/FEI) or the CapsuleResp status, that a healthy admin
# queue still answers Identify, and afterwards that slated is alive and its
# log free of sanitizer reports.  One PASS/FAIL line per case.
#
# The NVMe RPC method names come from src/mgmt/rpc.c; override them here if
# they differ: NVMF_RPC_SUBSYS, NVMF_RPC_HOST, NVMF_RPC_NS, NVMF_RPC_LISTENER.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

NVMF_RPC_SUBSYS=${NVMF_RPC_SUBSYS:-nvmf_subsystem_create}
NVMF_RPC_HOST=${NVMF_RPC_HOST:-nvmf_subsystem_add_host}
NVMF_RPC_NS=${NVMF_RPC_NS:-nvmf_ns_attach}
NVMF_RPC_LISTENER=${NVMF_RPC_LISTENER:-nvmf_listener_add}
SUBNQN=nqn.2026-12.io.slate:robust
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555

logdir=$SLATE_LOGDIR/robust-nvme
mkdir -p "$logdir"
bin=${NVME_TCP_PDU:-$SLATE_BUILD/tests/nvme-tcp-pdu}
[ -x "$bin" ] || {
	slate_result FAIL nvme-tcp.build "" "$bin not built"
	exit 1
}
state=$(mktemp -d /tmp/slate-robust-nvme.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"

write_config() {
	cat >"$1" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "nvr0", "backend": "mem", "size": "64M", "block_size": 512}},
  {"method": "$NVMF_RPC_SUBSYS", "params": {"nqn": "$SUBNQN"}},
  {"method": "$NVMF_RPC_HOST", "params": {"nqn": "$SUBNQN", "host": "$HOSTNQN"}},
  {"method": "$NVMF_RPC_NS", "params": {"nqn": "$SUBNQN", "nsid": 1, "namespace": "nvr0"}},
  {"method": "$NVMF_RPC_SUBSYS", "params": {"nqn": "$SUBNQN-any"}},
  {"method": "$NVMF_RPC_LISTENER", "params": {"addr": "127.0.0.1", "port": $2}}
]}
JSON
}

write_config "$state/slate.json" 0
if ! slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" || [ -z "$SLATE_NVME_PORT" ]; then
	slate_result FAIL nvme-tcp.start "$daemon_log" "slated did not start"
	exit 1
fi
port=$SLATE_NVME_PORT

fail=0
pass=0
for c in $("$bin" -l); do
	log=$logdir/$c.log
	if ! slate_alive; then
		slate_result FAIL "nvme-tcp.$c" "$daemon_log" "slated is not running"
		fail=$((fail + 1))
		continue
	fi
	out=$(timeout 30 "$bin" -p "$port" -n "$SUBNQN" -H "$HOSTNQN" "$c" 2>&1)
	echo "$out" >"$log"
	if ! echo "$out" | grep -q "^PASS $c\$"; then
		slate_result FAIL "nvme-tcp.$c" "$log" "$(echo "$out" | tail -n1)"
		fail=$((fail + 1))
	elif ! slate_alive; then
		slate_result FAIL "nvme-tcp.$c" "$daemon_log" "slated died"
		fail=$((fail + 1))
	elif ! slate_sanitizer_clean "$daemon_log"; then
		slate_result FAIL "nvme-tcp.$c" "$daemon_log" "sanitizer report"
		fail=$((fail + 1))
	else
		slate_result PASS "nvme-tcp.$c"
		pass=$((pass + 1))
	fi
done
# The listener was added with port 0: the discovery log must name the port
# slated got (tests/robust/nvme_discovery.py), never 0.
log=$logdir/discovery-port.log
if timeout 30 python3 "$here/nvme_discovery.py" "$port" "$HOSTNQN" "$SUBNQN" >"$log" 2>&1 &&
	grep -q '^PASS discovery-port$' "$log"; then
	slate_result PASS nvme-tcp.discovery-port
	pass=$((pass + 1))
else
	slate_result FAIL nvme-tcp.discovery-port "$log" "$(tail -n1 "$log")"
	fail=$((fail + 1))
fi

rc=0
slate_stop || rc=$?
if [ "$rc" -ne 0 ] || ! slate_sanitizer_clean "$daemon_log"; then
	slate_result FAIL nvme-tcp.shutdown "$daemon_log" "exit status $rc"
	fail=$((fail + 1))
else
	slate_result PASS nvme-tcp.shutdown
	pass=$((pass + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
