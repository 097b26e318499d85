#!/bin/bash
# tests/robust/run.sh — malformed iSCSI PDUs against a live slated (ASan).
#
# Starts build-asan/slated with a mem namespace, then runs robust-pdu
# (tests/robust/pdu.c) once per case: each case opens a fresh connection,
# sends one malformed PDU sequence, and checks that the target answers as
# RFC 7143 allows (Reject, Login reject, error status, close; never a hang
# or acceptance) while an already-logged-in session keeps answering NOP-Out
# and TEST UNIT READY.  After every case slated must still be alive and its
# log free of sanitizer reports.  One PASS/FAIL line per case.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/robust
mkdir -p "$logdir"
bin=${ROBUST_PDU:-$SLATE_BUILD/tests/robust-pdu}
[ -x "$bin" ] || {
	slate_result FAIL robust.build "" "$bin not built"
	exit 1
}
state=$(mktemp -d /tmp/slate-robust.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"

# slated picks its port (0); a restart may get another one.
start() {
	slate_write_config "$state/slate.json" 0 mem 64
	slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" && port=$SLATE_PORT
}
if ! start; then
	slate_result FAIL robust.start "$daemon_log" "slated did not start"
	exit 1
fi

fail=0
for c in $("$bin" -l); do
	log=$logdir/$c.log
	if ! slate_alive; then
		echo "--- restarting slated ---" >>"$daemon_log"
		start || {
			slate_result FAIL "robust.$c" "$daemon_log" "slated could not be restarted"
			fail=1
			continue
		}
	fi
	mark=$(wc -l <"$daemon_log")
	timeout -k 5 90 "$bin" -a 127.0.0.1 -p "$port" -t "$SLATE_IQN" -c "$c" >"$log" 2>&1
	rc=$?
	if ! slate_alive; then
		{
			echo "=== slated.log (new lines) ==="
			tail -n +"$((mark + 1))" "$daemon_log" | tail -n 40
		} >>"$log"
		slate_result FAIL "robust.$c" "$log" "slated died"
		fail=1
	elif tail -n +"$((mark + 1))" "$daemon_log" | grep -qE 'ERROR: AddressSanitizer|runtime error:'; then
		tail -n +"$((mark + 1))" "$daemon_log" | tail -n 40 >>"$log"
		slate_result FAIL "robust.$c" "$log" "sanitizer report"
		fail=1
	elif [ "$rc" = 0 ]; then
		slate_result PASS "robust.$c"
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		slate_result FAIL "robust.$c" "$log" "robust-pdu timed out"
		fail=1
	else
		slate_result FAIL "robust.$c" "$log" "$(grep -m1 -E 'FAIL|setup' "$log" | sed 's/^ *//')"
		fail=1
	fi
done
# A portal added at run time with port 0: iscsi_portal_list names the port
# the kernel picked, the log line says the same, SendTargets advertises it, a
# login through it works, and deleting it by that port closes it.
portal_port0() {
	local ctl=$SLATE_BUILD/slatectl sock=$state/run/slated.sock p
	"$ctl" -s "$sock" iscsi_portal_add addr=127.0.0.1 port=0 || return 1
	p=$("$ctl" -s "$sock" --json iscsi_portal_list |
		python3 -c 'import json,sys; print(" ".join(str(x["port"]) for x in json.load(sys.stdin) if x["port"] != int(sys.argv[1])))' "$port")
	echo "new portal: port $p"
	case $p in '' | 0 | *' '*) return 1 ;; esac
	grep -q "portal listening on 127.0.0.1:$p\$" "$daemon_log" || return 1
	iscsi-ls "iscsi://127.0.0.1:$p" | grep -q "Portal:127.0.0.1:$p," || return 1
	iscsi-inq "$(slate_url "$p")" >/dev/null || return 1
	"$ctl" -s "$sock" iscsi_portal_delete addr=127.0.0.1 port="$p" || return 1
	! "$ctl" -s "$sock" --json iscsi_portal_list | grep -q "\"port\": $p\$" || return 1
	! slate_port_busy "$p"
}
log=$logdir/portal-port0.log
if ! slate_alive; then
	slate_result FAIL robust.portal-port0 "$daemon_log" "slated is not running"
	fail=1
elif portal_port0 >"$log" 2>&1; then
	slate_result PASS robust.portal-port0
else
	slate_result FAIL robust.portal-port0 "$log" "port-0 portal not listed, advertised, usable or deleted"
	fail=1
fi

slate_stop
rc=$?
if [ "$rc" != 0 ] || ! slate_sanitizer_clean "$daemon_log"; then
	slate_result FAIL robust.clean-shutdown "$daemon_log" "exit status $rc"
	fail=1
else
	slate_result PASS robust.clean-shutdown
fi

# Max-size (32 MiB) commands from several iSCSI and NVMe/TCP connections at
# once, two in flight per connection, on 2 reactors with a 32 MiB pool each:
# all complete with their data intact, slated's RSS stays under a bound
# derived from the pool size (tests/robust/bigxfer.py), and the pool is
# empty again afterwards.
bigxfer() {
	local big=$state/big sock
	mkdir -p "$big"
	cat >"$big/slate.json" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "big0", "backend": "mem", "size": "512M", "block_size": 512}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "big0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "nqn.2026-12.io.slate:big0"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "nqn.2026-12.io.slate:big0", "namespace": "big0"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
	slate_start "$big/run" "$big/slate.json" 0 "$daemon_log" -m 2 -x 32 || return 1
	timeout -k 5 300 python3 "$here/bigxfer.py" load "$SLATE_PID" "$SLATE_PORT" "$SLATE_IQN" \
		"$SLATE_NVME_PORT" nqn.2026-12.io.slate:big0 3 2 $((32 << 20)) 64 8 || return 1
	sock=$big/run/slated.sock
	"$SLATE_BUILD/slatectl" -s "$sock" --json daemon_status |
		python3 -c 'import json,sys; p=json.load(sys.stdin)["xfer_pool"]; print(p); sys.exit(p["in_use_bytes"] != 0 or p["waiting"] != 0 or p["peak_bytes"] > 32 << 20 or p["waits"] == 0)' ||
		return 1
	slate_stop && slate_sanitizer_clean "$daemon_log"
}
log=$logdir/bigxfer.log
if bigxfer >"$log" 2>&1; then
	slate_result PASS robust.bigxfer-concurrent
else
	slate_result FAIL robust.bigxfer-concurrent "$log" "$(grep -m1 FAIL "$log" || tail -n1 "$log")"
	slate_stop >/dev/null 2>&1
	fail=1
fi
# Fault injection (fault_set): tests/robust/faults.sh, its own slated with one reactor.
"$here/faults.sh" || fail=1
exit $fail
