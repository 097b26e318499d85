#!/bin/bash
# tests/durability/pi.sh — a namespace with protection information (issue 10)
# keeps acknowledged writes' PI with their data across kill -9.
#
# One file-backed namespace formatted with PI type 1 (8-byte metadata, CRC16
# guard), exported as iSCSI LUN 0; tests/durability/durable.c writes with
# FUA or followed by SYNCHRONIZE CACHE and journals every acknowledged block;
# the core generates each block's PI.  tests/durability/pi_check.c reads the
# data file and the metadata store (<state_dir>/ns0.pi) offline and checks
# that every journaled block's stored guard is the CRC of its data.
#   pi.kill9        SIGKILL after the writer ends: every journaled block's
#                   guard matches (pi-check), and after a restart every block
#                   reads back (durable verify)
#   pi.mid-stream   SIGKILL while writes are in flight: every acknowledged
#                   block reads back through READ(10), which checks the
#                   guard, so a block whose later, unacknowledged write was
#                   cut must still pass (README "Protection information",
#                   crash behaviour); pi-check's counts are reported
#   pi.caught       a byte of a journaled block flipped in the data file
#                   behind slated's back: pi-check finds the mismatch (the
#                   check can fail)
#   pi.other-format the config asking for PI type 3: slated refuses the
#                   namespace (its saved format is type 1)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/durability
mkdir -p "$logdir"
bin=${DURABLE:-$SLATE_BUILD/tests/durable}
check=$SLATE_BUILD/tests/pi-check
for b in "$bin" "$check"; do
	[ -x "$b" ] || {
		slate_result FAIL pi.build "" "$b not built (libiscsi-dev missing?)"
		exit 1
	}
done
state=$(mktemp -d /tmp/slate-pi.XXXXXX)
trap 'slate_stop KILL >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/pi-slated.log
: >"$log"
journal=$state/journal
fail=0
url=
config() { SLATE_NS_EXTRA=$1 slate_write_config "$state/slate.json" 0 file 32 "$state/ns0.img"; }
start() { slate_start "$state/run" "$state/slate.json" 0 "$log" && url=$(slate_url "$SLATE_PORT"); }
pifile=$state/run/$SLATE_NS.pi

config '"pi_type": 1'
if ! start; then
	slate_result FAIL pi.kill9 "$log" "slated did not start"
	exit 1
fi
: >"$logdir/pi-kill9.log"
if "$bin" write -u "$url" -j "$journal" -g 1 -n 1000 >>"$logdir/pi-kill9.log" 2>&1; then
	slate_stop KILL >/dev/null 2>&1
	if ! "$check" "$state/ns0.img" "$pifile" "$journal" >>"$logdir/pi-kill9.log" 2>&1; then
		slate_result FAIL pi.kill9 "$logdir/pi-kill9.log" "an acknowledged block's PI does not match"
		fail=1
	elif ! start || ! timeout 120 "$bin" verify -u "$url" -j "$journal" >>"$logdir/pi-kill9.log" 2>&1; then
		slate_result FAIL pi.kill9 "$logdir/pi-kill9.log" "acknowledged writes lost"
		fail=1
	else
		slate_result PASS pi.kill9 "" "$(grep "journaled blocks" "$logdir/pi-kill9.log")"
	fi
else
	slate_result FAIL pi.kill9 "$logdir/pi-kill9.log" "writer failed"
	fail=1
fi

: >"$logdir/pi-mid-stream.log"
"$bin" write -u "$url" -j "$journal" -s -g 2 -n 10000000 >>"$logdir/pi-mid-stream.log" 2>&1 &
wpid=$!
sleep 2
slate_stop KILL >/dev/null 2>&1
wait "$wpid"
rc=$?
"$check" "$state/ns0.img" "$pifile" "$journal" >"$logdir/pi-mid-stream-check.log" 2>&1
if [ "$rc" != 0 ]; then
	slate_result FAIL pi.mid-stream "$logdir/pi-mid-stream.log" "writer failed (rc=$rc)"
	fail=1
elif ! start || ! timeout 120 "$bin" verify -u "$url" -j "$journal" >>"$logdir/pi-mid-stream.log" 2>&1; then
	slate_result FAIL pi.mid-stream "$logdir/pi-mid-stream.log" "acknowledged writes lost"
	fail=1
else
	slate_result PASS pi.mid-stream "" "$(tail -1 "$logdir/pi-mid-stream-check.log")"
fi
slate_stop TERM >/dev/null 2>&1

# A journaled block's first data byte flipped: the guard no longer matches.
lba=$(awk 'NR == 1 { print $1 }' "$journal")
# (inverted, not overwritten with a constant the pattern may already hold there)
python3 -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xFF]))' "$state/ns0.img" $((lba * 512 + 40))
if "$check" "$state/ns0.img" "$pifile" "$journal" >"$logdir/pi-caught.log" 2>&1; then
	slate_result FAIL pi.caught "$logdir/pi-caught.log" "a flipped byte went unnoticed"
	fail=1
elif grep -q "^lba $lba: guard" "$logdir/pi-caught.log"; then
	slate_result PASS pi.caught
else
	slate_result FAIL pi.caught "$logdir/pi-caught.log" "no mismatch reported at lba $lba"
	fail=1
fi

config '"pi_type": 3'
first=$(($(wc -l <"$log") + 1))
if start 2>/dev/null; then
	slate_result FAIL pi.other-format "$log" "slated opened the namespace with another format"
	fail=1
elif tail -n +"$first" "$log" | grep -q "another protection information format"; then
	slate_result PASS pi.other-format
else
	slate_result FAIL pi.other-format "$log" "no refusal in the log"
	fail=1
fi
slate_stop KILL >/dev/null 2>&1
if ! slate_sanitizer_clean "$log"; then
	slate_result FAIL pi.sanitizer "$log" "sanitizer report in slated.log"
	fail=1
fi
exit $fail
