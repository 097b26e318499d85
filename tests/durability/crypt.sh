#!/bin/bash
# tests/durability/crypt.sh — an encrypted namespace (core/crypt.h) keeps
# acknowledged writes across kill -9, and opens only with its key.
#
# One file-backed namespace, encrypt=true with a key file (64 hex digits,
# mode 0600), exported as iSCSI LUN 0; tests/durability/durable.c writes
# and journals every acknowledged block.
#   crypt.kill9        SIGKILL after the writer ends; restart; every
#                      acknowledged block reads back (decrypted) intact
#   crypt.mid-stream   SIGKILL while writes are in flight; the same check
#   crypt.no-key       the config without key_file: slated refuses the
#                      namespace ("is encrypted") and does not come up
#   crypt.wrong-key    another key file: refused ("wrong key")
#   crypt.key-mode     the right key in a file others may read (0644): refused
#   crypt.reopen       the right key again: the data is all there
#   crypt.ciphertext   the data file holds no block the writer wrote in clear
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/durability
mkdir -p "$logdir"
bin=${DURABLE:-$SLATE_BUILD/tests/durable}
[ -x "$bin" ] || {
	slate_result FAIL crypt.build "" "$bin not built (libiscsi-dev missing?)"
	exit 1
}
state=$(mktemp -d /tmp/slate-crypt.XXXXXX)
trap 'slate_stop KILL >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/crypt-slated.log
: >"$log"
journal=$state/journal
(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$state/good.key" &&
	od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$state/bad.key")
fail=0
url=

config() { # config [EXTRA]: the namespace's crypt parameters
	SLATE_NS_EXTRA=$1 slate_write_config "$state/slate.json" 0 file 32 "$state/ns0.img"
}
start() { slate_start "$state/run" "$state/slate.json" 0 "$log" && url=$(slate_url "$SLATE_PORT"); }
good="\"encrypt\": true, \"key_file\": \"$state/good.key\""

# verify NAME: restart and read every journaled block back
verify() {
	local name=$1
	if ! start; then
		slate_result FAIL "crypt.$name" "$log" "slated did not restart with the key"
		fail=1
		return
	fi
	if timeout 120 "$bin" verify -u "$url" -j "$journal" >>"$logdir/crypt-$name.log" 2>&1; then
		slate_result PASS "crypt.$name"
	else
		slate_result FAIL "crypt.$name" "$logdir/crypt-$name.log" "acknowledged writes lost"
		fail=1
	fi
}

# refused NAME WHAT: slated does not start and its log says WHAT
refused() {
	local name=$1 what=$2 first
	first=$(($(wc -l <"$log") + 1))
	if start 2>/dev/null; then
		slate_result FAIL "crypt.$name" "$log" "slated started without the right key"
		fail=1
		slate_stop KILL >/dev/null 2>&1
		return
	fi
	slate_stop KILL >/dev/null 2>&1
	if tail -n +"$first" "$log" | grep -q "$what"; then
		slate_result PASS "crypt.$name"
	else
		slate_result FAIL "crypt.$name" "$log" "no '$what' in the log"
		fail=1
	fi
}

config "$good"
if ! start; then
	slate_result FAIL crypt.kill9 "$log" "slated did not start"
	exit 1
fi
: >"$logdir/crypt-kill9.log"
if "$bin" write -u "$url" -j "$journal" -g 1 -n 1000 >>"$logdir/crypt-kill9.log" 2>&1; then
	slate_stop KILL >/dev/null 2>&1
	verify kill9
else
	slate_result FAIL crypt.kill9 "$logdir/crypt-kill9.log" "writer failed"
	fail=1
fi

: >"$logdir/crypt-mid-stream.log"
"$bin" write -u "$url" -j "$journal" -s -g 2 -n 10000000 >>"$logdir/crypt-mid-stream.log" 2>&1 &
wpid=$!
sleep 2
slate_stop KILL >/dev/null 2>&1
wait "$wpid"
rc=$?
if [ "$rc" != 0 ]; then
	slate_result FAIL crypt.mid-stream "$logdir/crypt-mid-stream.log" "writer failed (rc=$rc)"
	fail=1
else
	verify mid-stream
fi
slate_stop TERM >/dev/null 2>&1

config ""
refused no-key "is encrypted: give key_file or passphrase_file"
config "\"encrypt\": true, \"key_file\": \"$state/bad.key\""
refused wrong-key "wrong key"
cp "$state/good.key" "$state/open.key" && chmod 644 "$state/open.key"
config "\"encrypt\": true, \"key_file\": \"$state/open.key\""
refused key-mode "lets others read it"
config "$good"
: >"$logdir/crypt-reopen.log"
verify reopen
slate_stop TERM >/dev/null 2>&1

# Every block durable.c writes starts with its MAGIC (durable.c fill()): in
# clear, the data file would hold it at the start of every written block.
magic=$(sed -n 's/^#define MAGIC *\(0x[0-9a-fA-F]*\).*/\1/p' "$here/durable.c")
if python3 - "$state/ns0.img" "$magic" >"$logdir/crypt-ciphertext.log" 2>&1 <<'PY'; then
import struct, sys
data = open(sys.argv[1], "rb").read()
magic = struct.pack("<Q", int(sys.argv[2].rstrip("uUlL"), 16))
blocks = [data[i:i + 512] for i in range(0, len(data), 512)]
nz = sum(1 for b in blocks if b != bytes(512))
clear = sum(1 for b in blocks if b[:8] == magic)
print("written blocks in the data file:", nz, "- in clear:", clear)
assert nz > 100, "the writer's blocks are not in the data file"
assert clear == 0, "plaintext blocks in the data file"
PY
	slate_result PASS crypt.ciphertext
else
	slate_result FAIL crypt.ciphertext "$logdir/crypt-ciphertext.log"
	fail=1
fi
if ! slate_sanitizer_clean "$log"; then
	slate_result FAIL crypt.sanitizer "$log" "sanitizer report in slated.log"
	fail=1
fi
exit $fail
