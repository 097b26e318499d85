#!/bin/bash
# tests/durability/flash.sh — the flash model's state survives a restart of
# slated, and a damaged state file is refused (README "The flash model").
#
# A file-backed flash-model namespace exported over NVMe/TCP, written by
# slate-perf --workload lifetimes with FDP placement handles (a real
# transport).  Then:
#   flash.counted   the model counted what the initiator wrote (host bytes at
#                   least the bytes slate-perf wrote, media = host + GC moves,
#                   both placement handles used)
#   flash.restart   after SIGTERM and a restart on the same state dir,
#                   flash_stats is the same (the namespace was still attached
#                   to its subsystem at shutdown)
#   flash.continue  writing on after the restart adds to the counters
#   flash.kill9     after a host's SYNCHRONIZE CACHE (tests/durable over
#                   iSCSI) the state is saved in the background: a kill -9
#                   once the file was rewritten keeps what was written
#   flash.damaged   a state file with a flipped byte is not used: the log says
#                   so and the model starts from zero
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/durability
mkdir -p "$logdir"
perf=${SLATE_PERF:-$SLATE_BUILD/tools/slate-perf/slate-perf}
ctl=$SLATE_BUILD/slatectl
state=$(mktemp -d /tmp/slate-flash.XXXXXX)
trap 'slate_stop KILL >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/flash-slated.log
: >"$log"
NQN=nqn.2026-12.io.slate:flash-dur
cat >"$state/slate.json" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "fm", "backend": "file", "size": "64M", "block_size": 4096,
   "flash_model": true, "flash_erase_block": "256K", "flash_op_percent": 20}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$NQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "fm"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "fm"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
fail=0
start() { slate_start "$state/run" "$state/slate.json" 0 "$log"; }
stats() { "$ctl" -s "$state/run/slated.sock" --json flash_stats name=fm; }
write() {
	"$perf" -p "$SLATE_NVME_PORT" -n "$NQN" --workload lifetimes --place fdp -q 4 -b 64k \
		--hot-span 4m --bytes "$1" --json >"$logdir/flash-perf.json" 2>"$logdir/flash-perf.err"
}
written() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["writes"])' "$logdir/flash-perf.json"; }

if ! start; then
	slate_result FAIL flash.counted "$log" "slated did not start"
	exit 1
fi
if ! write 96m; then
	slate_result FAIL flash.counted "$logdir/flash-perf.err" "slate-perf failed"
	exit 1
fi
stats >"$logdir/flash-a.json"
if python3 - "$logdir/flash-a.json" "$(written)" <<'PY' >"$logdir/flash-counted.log" 2>&1; then
import json, sys
d = json.load(open(sys.argv[1])); t = d["total"]
ios = int(sys.argv[2])
print(t)
assert t["host_bytes"] >= 96 << 20, "host bytes below what was written"
assert t["media_bytes"] == t["host_bytes"] + t["gc_bytes"], "media != host + gc"
used = [p for p in d["placements"] if p.get("flash", {}).get("host_bytes")]
assert len(used) >= 2, "both placement handles should have written: %s" % used
PY
	slate_result PASS flash.counted
else
	slate_result FAIL flash.counted "$logdir/flash-counted.log"
	fail=1
fi

slate_stop TERM
if ! start; then
	slate_result FAIL flash.restart "$log" "slated did not restart"
	exit 1
fi
stats >"$logdir/flash-b.json"
if python3 -c 'import json,sys; a,b=[json.load(open(f)) for f in sys.argv[1:3]]; sys.exit(a["total"] != b["total"] or [p.get("flash") for p in a["placements"]] != [p.get("flash") for p in b["placements"]])' \
	"$logdir/flash-a.json" "$logdir/flash-b.json" && grep -q 'flash model state loaded' "$log"; then
	slate_result PASS flash.restart
else
	slate_result FAIL flash.restart "$log" "flash_stats differ after the restart (flash-a.json, flash-b.json)"
	fail=1
fi

if write 32m && stats >"$logdir/flash-c.json" &&
	python3 -c 'import json,sys; b,c=[json.load(open(f))["total"] for f in sys.argv[1:3]]; sys.exit(not (c["host_bytes"] >= b["host_bytes"] + (32 << 20) and c["valid_bytes"] == b["valid_bytes"]))' \
		"$logdir/flash-b.json" "$logdir/flash-c.json"; then
	slate_result PASS flash.continue
else
	slate_result FAIL flash.continue "$logdir/flash-perf.err" "counters did not go on from the saved state"
	fail=1
fi

# kill -9 after a flush: the saver thread rewrote the file after the host's SYNCHRONIZE CACHE
durable=${DURABLE:-$SLATE_BUILD/tests/durable}
f=$state/run/fm.flash
if [ ! -x "$durable" ]; then
	slate_result SKIP flash.kill9 "$durable not built (libiscsi-dev missing?)"
else
	h0=$(stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["host_bytes"])')
	touch -d '2000-01-01' "$f" 2>/dev/null # any save from now on changes the mtime
	if "$durable" write -u "$(slate_url "$SLATE_PORT")" -j "$state/journal" -g 1 -n 300 \
		>"$logdir/flash-durable.log" 2>&1; then
		for _ in $(seq 1 600); do # wait for the saver (it runs after the flush), not a deadline
			[ "$(stat -c %Y "$f")" -gt 946684800 ] && break
			sleep 0.1
		done
		slate_stop KILL
		if start && h1=$(stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["host_bytes"])') &&
			[ "$h1" -gt "$h0" ]; then
			slate_result PASS flash.kill9
		else
			slate_result FAIL flash.kill9 "$log" "host bytes after kill -9: ${h1:-?}, before the flushed writes: $h0"
			fail=1
		fi
	else
		slate_result FAIL flash.kill9 "$logdir/flash-durable.log" "durable write failed"
		fail=1
	fi
fi

slate_stop TERM
if [ -s "$f" ]; then
	# flip one byte in the middle of the map
	python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0x5a; open(p,"wb").write(b)' "$f"
fi
first=$(($(wc -l <"$log") + 1))
if start && stats >"$logdir/flash-d.json" &&
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["total"]; sys.exit(t["host_bytes"] != 0)' "$logdir/flash-d.json" &&
	tail -n +"$first" "$log" | grep -q 'flash model state .* not used'; then
	slate_result PASS flash.damaged
else
	slate_result FAIL flash.damaged "$log" "a damaged state file was used, or not reported"
	fail=1
fi
slate_stop
exit $fail
