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

start() {
	port=$(slate_free_port) || return 1
	slate_write_config "$state/slate.json" "$port" mem 64
	slate_start "$state/run" "$state/slate.json" "$port" "$daemon_log"
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
slate_stop
rc=$?
if [ "$rc" != 0 ] || ! slate_sanitizer_clean "$daemon_log"; then
	slate_result FAIL robust.clean-shutdown "$daemon_log" "exit status $rc"
	fail=1
else
	slate_result PASS robust.clean-shutdown
fi
exit $fail
