#!/bin/bash
# tests/durability/run.sh — acknowledged writes survive kill -9 of slated.
#
# DESIGN.md "Durability and metadata": a write acknowledged with FUA, or one
# followed by an acknowledged SYNCHRONIZE CACHE, must survive SIGKILL of
# slated.  One state dir and file-backed namespace across all rounds; each
# round writes with tests/durability/durable.c (which journals every
# acknowledged block), kills slated with SIGKILL (or stops it with SIGTERM),
# restarts it on the same state dir, and reads every journaled block back.
# The stream rounds kill slated while writes are in flight.  One PASS/FAIL
# line per round.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/durability
mkdir -p "$logdir"
bin=${DURABLE:-$SLATE_BUILD/tests/durable}
[ -x "$bin" ] || {
	slate_result FAIL durability.build "" "$bin not built (libiscsi-dev missing?)"
	exit 1
}
state=$(mktemp -d /tmp/slate-dur.XXXXXX)
trap 'slate_stop KILL >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"
journal=$state/journal
slate_write_config "$state/slate.json" 0 file 64 "$state/ns0.img"
url=
fail=0

# slated picks a free port (0) at every start, so the URL is read again after
# each restart: the writer and the verifier always talk to the live daemon.
start() {
	slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" && url=$(slate_url "$SLATE_PORT")
}

# round NAME HOW WRITE-ARGS...  (HOW: kill = SIGKILL after the writer ends;
# stream:SECS = SIGKILL SECS seconds into a long write stream; term = SIGTERM)
round() {
	local name=$1 how=$2 log=$logdir/$1.log wpid rc
	shift 2
	: >"$log"
	if ! slate_alive && ! start; then
		slate_result FAIL "durability.$name" "$daemon_log" "slated did not start"
		fail=1
		return
	fi
	case $how in
	stream:*)
		"$bin" write -u "$url" -j "$journal" -s "$@" >>"$log" 2>&1 &
		wpid=$!
		sleep "${how#stream:}"
		echo "--- SIGKILL slated mid-stream ---" | tee -a "$log" >>"$daemon_log"
		slate_stop KILL >/dev/null 2>&1
		wait "$wpid"
		rc=$?
		;;
	*)
		"$bin" write -u "$url" -j "$journal" "$@" >>"$log" 2>&1
		rc=$?
		if [ "$how" = term ]; then
			echo "--- SIGTERM slated ---" | tee -a "$log" >>"$daemon_log"
			slate_stop TERM >>"$log" 2>&1 || {
				echo "slated exited non-zero on SIGTERM" >>"$log"
				rc=3
			}
		else
			echo "--- SIGKILL slated ---" | tee -a "$log" >>"$daemon_log"
			slate_stop KILL >/dev/null 2>&1
		fi
		;;
	esac
	if [ "$rc" != 0 ]; then
		slate_result FAIL "durability.$name" "$log" "writer failed (rc=$rc)"
		fail=1
		return
	fi
	if ! start; then
		slate_result FAIL "durability.$name" "$daemon_log" "slated did not restart on the same state dir"
		fail=1
		return
	fi
	if timeout 300 "$bin" verify -u "$url" -j "$journal" >>"$log" 2>&1; then
		slate_result PASS "durability.$name"
	else
		slate_result FAIL "durability.$name" "$log" "acknowledged writes lost after restart"
		fail=1
	fi
	if ! slate_sanitizer_clean "$daemon_log"; then
		slate_result FAIL "durability.$name.sanitizer" "$daemon_log" "sanitizer report in slated.log"
		fail=1
	fi
}

round kill-fua-and-sync kill -g 1 -n 1500
round kill-overwrite kill -g 2 -n 1500
round kill-mid-stream stream:3 -g 3 -n 10000000
round kill-mid-stream-early stream:1 -g 4 -n 10000000
round clean-restart term -g 5 -n 500
round kill-after-clean kill -g 6 -n 500
slate_stop
# Atomic writes: all old or all new after a crash at any moment (core/atomic.c).
"$here/atomic.sh" || fail=1
# The flash model's state across restarts (core/flash.c).
"$here/flash.sh" || fail=1
# Encryption at rest: durable across kill -9, opens only with its key (core/crypt.c).
"$here/crypt.sh" || fail=1
# Protection information: acknowledged writes' PI durable with their data (core/pistore.c).
"$here/pi.sh" || fail=1
exit $fail
