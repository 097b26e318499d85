#!/bin/bash
# tests/reload/run.sh — live reconfiguration (SIGHUP and config_reload) and
# slatectl for people (tables, --json, top, progress) against a live slated
# (ASan), with real clients: a libiscsi host (tests/reload/hold_io.c) stays
# logged in to an unaffected target and verifies its data through every
# reload; slate-perf's NVMe/TCP initiator runs I/O on an unaffected
# namespace through the reload; metrics-io checks that a namespace the
# reload write-protected refuses writes.  One PASS/FAIL line per check
# (slate_check); logs in $SLATE_LOGDIR/reload/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/reload
mkdir -p "$logdir"
SLATE_LOGDIR=$logdir
hold=$SLATE_BUILD/tests/reload-hold-io
san=$SLATE_BUILD/tests/reload-sanitize-start
io=$SLATE_BUILD/tests/metrics-io
perf=$SLATE_BUILD/tools/slate-perf/slate-perf
ctl=$SLATE_BUILD/slatectl
for b in "$hold" "$san" "$io" "$perf" "$ctl"; do
	[ -x "$b" ] || {
		slate_result FAIL reload.build "" "$b not built"
		exit 1
	}
done

IQA=iqn.2026-12.io.slate:reload-a
IQB=iqn.2026-12.io.slate:reload-b
IQC=iqn.2026-12.io.slate:reload-c
NQA=nqn.2026-12.io.slate:reload-a
state=$(mktemp -d /tmp/slate-reload.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"
cfg=$state/slate.json
sock=$state/run/slated.sock
c() { "$ctl" -s "$sock" "$@"; }

# Config "A": a0 on target A (LUN 0) and NVMe subsystem A (NSID 1); b0 and
# f0 on target B.  Ports 0: slated picks, a reload keeps them.
config_a() {
	cat <<JSON
{"options": {"allowed_dirs": ["$state"]}, "config": [
  {"method": "namespace_create", "params": {"name": "a0", "backend": "mem", "size": "16M"}},
  {"method": "namespace_create", "params": {"name": "b0", "backend": "mem", "size": "16M"}},
  {"method": "namespace_create", "params": {"name": "f0", "backend": "file", "path": "$state/f0.img", "size": "16M"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQA"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQA", "lun": 0, "namespace": "a0"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQB"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQB", "lun": 0, "namespace": "b0"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQB", "lun": 1, "namespace": "f0"}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQA"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQA", "nsid": 1, "namespace": "a0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
}

# Config "B": b0 removed; f0 write-protected and grown to 32M; a new c0 as
# LUN 0 of a new target C and as NSID 2 of subsystem A.
config_b() {
	cat <<JSON
{"options": {"allowed_dirs": ["$state"]}, "config": [
  {"method": "namespace_create", "params": {"name": "a0", "backend": "mem", "size": "16M"}},
  {"method": "namespace_create", "params": {"name": "f0", "backend": "file", "path": "$state/f0.img", "size": "32M", "write_protect": true}},
  {"method": "namespace_create", "params": {"name": "c0", "backend": "mem", "size": "8M"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQA"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQA", "lun": 0, "namespace": "a0"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQB"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQB", "lun": 1, "namespace": "f0"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQC"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQC", "lun": 0, "namespace": "c0"}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQA"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQA", "nsid": 1, "namespace": "a0"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQA", "nsid": 2, "namespace": "c0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
}

config_a >"$cfg"
if ! slate_start "$state/run" "$cfg" 0 "$daemon_log" -m 2; then
	slate_result FAIL reload.start "$daemon_log" "slated did not start"
	exit 1
fi
iport=$SLATE_PORT
nport=$SLATE_NVME_PORT

# hold_start NAME -> starts the libiscsi host on target A LUN 0 and waits for
# its first verified round; hold_end -> lets it finish and checks it.
hold_start() {
	rm -f "$state/ready" "$state/stop"
	"$hold" -u "iscsi://127.0.0.1:$iport/$IQA/0" -r "$state/ready" -s "$state/stop" \
		>"$state/hold.out" 2>&1 &
	hold_pid=$!
	local i
	for i in $(seq 1 300); do
		[ -e "$state/ready" ] && return 0
		kill -0 "$hold_pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "the iSCSI host did not start:"
	cat "$state/hold.out"
	return 1
}
hold_end() {
	touch "$state/stop"
	local rc=0
	wait "$hold_pid" || rc=$?
	echo "iSCSI host (one session, no reconnect) exit $rc: $(cat "$state/hold.out")"
	[ "$rc" = 0 ]
}

# sessions_of IQN -> the TSIHs of the sessions on a target
sessions_of() {
	c --json iscsi_session_list | python3 -c 'import json,sys
print(" ".join(str(s.get("tsih")) for s in json.load(sys.stdin) if s.get("target") == sys.argv[1]))' "$1"
}

# --- the RPC path: add, remove, change with hosts connected --------------------
rpc_reload() {
	hold_start || return 1
	local tsih_before tsih_after
	tsih_before=$(sessions_of "$IQA")
	echo "session on $IQA before: $tsih_before"
	# NVMe/TCP reads of a0 (NSID 1 of subsystem A) for the whole reload (reads:
	# the iSCSI host owns a0's data)
	"$perf" -t nvme-tcp -a 127.0.0.1 -p "$nport" -n "$NQA" --nsid 1 -q 8 -M 100 -d 6 --json \
		>"$state/perf.json" 2>"$state/perf.err" &
	local perf_pid=$!
	sleep 2
	config_b >"$cfg"
	c config_reload | tee "$state/reload.out" || {
		kill "$perf_pid" 2>/dev/null
		hold_end
		return 1
	}
	local prc=0
	wait "$perf_pid" || prc=$?
	hold_end || return 1
	tsih_after=$(sessions_of "$IQA")
	echo "session on $IQA after: $tsih_after; slate-perf exit $prc: $(cat "$state/perf.json")"
	[ "$prc" = 0 ] && [ -n "$tsih_before" ] || return 1
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["errors"] != 0 or d["ios"] == 0)' \
		"$state/perf.json" || return 1
	# what the reload did, as the daemon reports it
	c --json namespace_list >"$state/ns.json"
	python3 - "$state/ns.json" <<'EOF' || return 1
import json, sys
ns = {n["name"]: n for n in json.load(open(sys.argv[1]))}
assert "b0" not in ns, "b0 still there"
assert "c0" in ns and ns["c0"]["size"] == 8 << 20, "c0 missing"
assert ns["f0"]["size"] == 32 << 20, "f0 not grown: %d" % ns["f0"]["size"]
assert "config" in ns["f0"]["state"]["write_protect"], "f0 not write-protected"
assert ns["a0"]["stats"]["write_ops"] > 0
print("namespaces:", sorted(ns))
EOF
	# ... and as real hosts see it: target C LUN 0 is c0 (8 MiB), f0 refuses writes
	"$io" -u "iscsi://127.0.0.1:$iport/$IQC/0" -i iqn.2026-12.io.slate:reload-check -n 4 -b 4096 || return 1
	"$io" -u "iscsi://127.0.0.1:$iport/$IQB/1" -i iqn.2026-12.io.slate:reload-check -n 1 -b 512 -w || return 1
	c --json nvmf_subsystem_list | python3 -c 'import json,sys
s=[x for x in json.load(sys.stdin) if x["nqn"]==sys.argv[1]][0]
m={n["nsid"]: n["name"] for n in s["namespaces"]}
print("subsystem A:", m); sys.exit(m != {1: "a0", 2: "c0"})' "$NQA" || return 1
	# applied once: the same file again changes nothing
	c --json config_reload dry_run=true | python3 -c 'import json,sys; d=json.load(sys.stdin); print("again:", d["changes"]); sys.exit(d["changes"] != 0)'
}
slate_check reload rpc-add-remove-change rpc_reload

# --- the SIGHUP path ------------------------------------------------------------
wait_log() { # PATTERN FROM-LINE -> 0 once the daemon log has PATTERN after FROM-LINE
	local i
	for i in $(seq 1 100); do
		tail -n +"$2" "$daemon_log" | grep -q -- "$1" && return 0
		sleep 0.1
	done
	return 1
}
sighup_reload() {
	hold_start || return 1
	local first
	first=$(($(wc -l <"$daemon_log") + 1))
	# back to target B's b0 at LUN 0, c0 and target C removed, f0 writable
	config_a | sed "/\"name\": \"f0\"/s/\"size\": \"16M\"/\"size\": \"32M\"/" >"$cfg"
	grep f0 "$cfg"
	kill -HUP "$SLATE_PID"
	wait_log "reload $cfg: .* applied" "$first" || {
		tail -n +"$first" "$daemon_log"
		hold_end
		return 1
	}
	tail -n +"$first" "$daemon_log"
	hold_end || return 1
	c --json namespace_list | python3 -c 'import json,sys
ns={n["name"]: n for n in json.load(sys.stdin)}
print(sorted(ns)); sys.exit(sorted(ns) != ["a0", "b0", "f0"] or ns["f0"]["state"]["write_protect"] != [])' || return 1
	c --json iscsi_target_list | grep -q "$IQC" && return 1
	"$io" -u "iscsi://127.0.0.1:$iport/$IQB/1" -i iqn.2026-12.io.slate:reload-check -n 2 -b 512
}
slate_check reload sighup sighup_reload

# --- refusals: nothing changes, the log says why -------------------------------
same_state() { # BEFORE-FILE -> 0 if config_save still gives the same config
	c --json config_save >"$state/after.json"
	cmp "$1" "$state/after.json"
}
broken_file() {
	c --json config_save >"$state/before.json"
	cp "$cfg" "$state/good.json"
	local first
	first=$(($(wc -l <"$daemon_log") + 1))
	# a broken file: cut in the middle
	head -c 300 "$state/good.json" >"$cfg"
	kill -HUP "$SLATE_PID"
	wait_log "reload refused or stopped: $cfg:.*JSON parse error" "$first" || return 1
	same_state "$state/before.json" || return 1
	# by RPC: an error naming the problem, for each kind of broken file
	echo '{"config": [{"method": "namespace_create", "params": {"name": "x", "size": "lots"}}]}' >"$state/bad1.json"
	c config_reload path="$state/bad1.json" 2>&1 | tee /dev/stderr | grep -q "'size' must be bytes" || return 1
	echo '{"config": [{"method": "iscsi_lun_map", "params": {"target": "nope", "lun": 0, "namespace": "a0"}}]}' >"$state/bad2.json"
	c config_reload path="$state/bad2.json" 2>&1 | tee /dev/stderr | grep -q "no iSCSI target nope" || return 1
	echo '{"config": [{"method": "namespace_delete", "params": {"name": "a0"}}, {"method": "bogus", "params": {}}]}' >"$state/bad3.json"
	c config_reload path="$state/bad3.json" 2>&1 | tee /dev/stderr | grep -q "method not found: 'bogus'" || return 1
	same_state "$state/before.json" || return 1
	# a change that cannot be made live refuses the whole reload (here with a
	# valid addition next to it: c9 must not appear)
	sed -e 's/"name": "a0", "backend": "mem", "size": "16M"/&, "block_size": 4096/' \
		-e 's/^  {"method": "iscsi_portal_add"/  {"method": "namespace_create", "params": {"name": "c9", "backend": "mem", "size": "1M"}},\n&/' \
		"$state/good.json" >"$cfg"
	grep -c c9 "$cfg"
	first=$(($(wc -l <"$daemon_log") + 1))
	! c config_reload 2>"$state/imm.err" || return 1
	cat "$state/imm.err"
	grep -q "block_size cannot change live (running 512, file 4096)" "$state/imm.err" &&
		tail -n +"$first" "$daemon_log" | grep -q "namespace a0: block_size cannot change live" &&
		same_state "$state/before.json" || return 1
	# removing a target a host is logged in to is refused (its session stays)
	hold_start || return 1
	grep -v "\"$IQA\"" "$state/good.json" >"$cfg"
	! c config_reload 2>"$state/sess.err" || { hold_end; return 1; }
	cat "$state/sess.err"
	hold_end || return 1
	grep -q "iSCSI target $IQA has 1 session(s)" "$state/sess.err" && same_state "$state/before.json" || return 1
	cp "$state/good.json" "$cfg"
}
slate_check reload refused-changes-nothing broken_file

# --- slatectl for people: tables by default, --json for scripts --------------
tables() {
	c ns | tee "$state/ns.txt"
	c --json ns >"$state/ns.json" || return 1
	# one row per namespace, under a header, with sizes for people
	head -n 1 "$state/ns.txt" | grep -q '^NAME  *BACKEND  *SIZE' || return 1
	[ "$(awk 'NR > 1 {print $1}' "$state/ns.txt" | sort | tr '\n' ' ')" = \
		"$(python3 -c 'import json,sys; print(" ".join(sorted(n["name"] for n in json.load(open(sys.argv[1])))), end=" ")' "$state/ns.json")" ] || return 1
	grep -q '^a0  *mem  *16 MiB  *512 ' "$state/ns.txt" || return 1
	# the same with --json after the method; params as '{...}' still work
	c ns --json | python3 -c 'import json,sys; json.load(sys.stdin)' || return 1
	c namespace_set --json '{"name": "a0", "write_cache": true}' | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["name"] != "a0")' || return 1
	c targets | tee "$state/t.txt"
	grep -q "^$IQA  *0=a0 " "$state/t.txt" && grep -q "^$IQB  *0=b0,1=f0 " "$state/t.txt" || return 1
	c nvmf_subsystem_list | tee /dev/stderr | grep -q "^$NQA  *nvme .* 1=a0 " || return 1
	c status | tee /dev/stderr | grep -q '^reactors  *2$' || return 1
	c config_reload dry_run=true | tee /dev/stderr | grep -q ': 0 changes (dry run: not applied)' || return 1
	c --json status | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["reactors"] != 2)'
}
slate_check reload slatectl-tables tables

# --- slatectl top: counts of a known workload ----------------------------------
top_once() {
	# 7 writes of 4 KiB by a host of our naming on b0 (fresh since the SIGHUP test)
	"$io" -u "iscsi://127.0.0.1:$iport/$IQB/0" -i iqn.2026-12.io.slate:top-io -n 7 -b 4096 || return 1
	c top --once --interval 0.2 | tee "$state/top.txt"
	grep -q '^NAMESPACE .*W-IOPS .*WRITES' "$state/top.txt" || return 1
	# every namespace has its row; b0 and the host show exactly the 7 writes
	local n
	for n in a0 b0 f0; do grep -q "^$n " "$state/top.txt" || return 1; done
	[ "$(awk '$1 == "b0" {print $(NF-1)}' "$state/top.txt")" = 7 ] || return 1
	[ "$(awk '$1 == "iscsi" && $2 == "iqn.2026-12.io.slate:top-io" {print $(NF-1)}' "$state/top.txt")" = 7 ] || return 1
	# --iterations N: N samples, plainly
	[ "$(c top --iterations 2 --interval 0.1 | grep -c '^NAMESPACE ')" = 2 ]
}
slate_check reload top-once top_once

# On a terminal top redraws in place and leaves on q, restoring the terminal.
top_quits() {
	command -v script >/dev/null || {
		echo "script(1) missing"
		return 1
	}
	local rc=0
	(sleep 1.5; printf q) | timeout 20 script -qfec "$ctl -s $sock top --interval 0.2" /dev/null >"$state/top-tty.txt" || rc=$?
	echo "exit $rc"
	tr -d '\r' <"$state/top-tty.txt" | grep -a -m1 'q quits'
	[ "$rc" = 0 ] && grep -aq $'\033\[H\033\[2J' "$state/top-tty.txt"
}
slate_check reload top-quits-on-q top_quits

# --- slatectl progress: a sanitize's bar and ETA until it ends -------------------
progress() {
	# 8 MiB paced at 2 MiB/s: a sanitize that runs for seconds
	c namespace_create name=s0 backend=mem size=8M sanitize_rate_mibps=2 &&
		c iscsi_lun_map target="$IQB" lun=2 namespace=s0 || return 1
	"$san" -u "iscsi://127.0.0.1:$iport/$IQB/2" || return 1
	c progress s0 --interval 0.3 | tee "$state/progress.txt"
	local prc=${PIPESTATUS[0]}
	[ "$prc" = 0 ] || return 1
	# at least one bar while running, never going back, then done
	python3 - "$state/progress.txt" <<'EOF' || return 1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
bars = [float(m.group(1)) for l in lines if (m := re.match(r"s0: sanitize \[[#.]{40}\] +([0-9.]+)%  ETA ", l))]
assert bars, "no progress bar"
assert bars == sorted(bars), "progress went back: %s" % bars
assert lines[-1] == "s0: sanitize done", lines[-1]
assert len(bars) < 2 or any(re.search(r"ETA [0-9]+:[0-9]{2}:[0-9]{2}$", l) for l in lines), "no ETA"
print("bars:", bars)
EOF
	c iscsi_lun_unmap target="$IQB" lun=2 && c namespace_delete name=s0
}
slate_check reload progress progress

# --- zero-copy sends (options.zerocopy_send_min, issue 13), turned on and off live ---
# 128 KiB NVMe/TCP reads checked block by block (slate-perf --verify) and
# 256 KiB iSCSI reads while zero-copy is on: the zc_sends counter rises, every
# notification is read (zc_notifs catches up with zc_sends), no error; off
# again, it stays still.  ~8 s.
zc_total() { c --json reactor_stats | jq -r '.total | "\(.zc_sends) \(.zc_notifs)"'; }
zc_reload() { # BYTES -> the config before, with options.zerocopy_send_min = BYTES and z0, reloaded
	python3 - "$state/pre-zc.json" "$cfg" "$1" "$NQA" "$IQA" <<'EOF' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
d.setdefault("options", {})["zerocopy_send_min"] = int(sys.argv[3])
d["config"] += [
    {"method": "namespace_create", "params": {"name": "z0", "backend": "mem", "size": "16M"}},
    {"method": "nvmf_ns_attach", "params": {"nqn": sys.argv[4], "nsid": 7, "namespace": "z0"}},
    {"method": "iscsi_lun_map", "params": {"target": sys.argv[5], "lun": 7, "namespace": "z0"}}]
json.dump(d, open(sys.argv[2], "w"))
EOF
	c config_reload >/dev/null
}
zerocopy() {
	cp "$cfg" "$state/pre-zc.json"
	zc_reload 65536 || return 1
	c --json config_save | jq -e '.options.zerocopy_send_min == 65536' >/dev/null || return 1
	local z0 n0 z1 n1
	read -r z0 n0 <<<"$(zc_total)"
	"$perf" -t nvme-tcp -a 127.0.0.1 -p "$nport" -n "$NQA" --nsid 7 -b 128k -M 50 -q 8 -d 2 \
		-s 16M --verify --json >"$state/zc-nvme.json" 2>"$state/zc-nvme.err" || {
		cat "$state/zc-nvme.err"
		return 1
	}
	"$perf" -t iscsi -u "iscsi://127.0.0.1:$iport/$IQA/7" -b 256k -M 100 -q 4 -d 2 -s 16M \
		--json >"$state/zc-iscsi.json" 2>"$state/zc-iscsi.err" || return 1
	jq -c '{ios, errors}' "$state/zc-nvme.json" "$state/zc-iscsi.json"
	jq -s -e 'all(.[]; .errors == 0 and .ios > 0)' "$state/zc-nvme.json" "$state/zc-iscsi.json" \
		>/dev/null || return 1
	sleep 0.5
	read -r z1 n1 <<<"$(zc_total)"
	echo "zero-copy on: $((z1 - z0)) sends, $((n1 - n0)) notified"
	[ $((z1 - z0)) -gt 100 ] && [ $((n1 - n0)) = $((z1 - z0)) ] || return 1
	zc_reload 0 || return 1
	"$perf" -t nvme-tcp -a 127.0.0.1 -p "$nport" -n "$NQA" --nsid 7 -b 128k -M 100 -q 8 -d 1 \
		-s 16M --json >"$state/zc-off.json" 2>&1 || return 1
	read -r z0 n0 <<<"$(zc_total)"
	echo "zero-copy off: $((z0 - z1)) sends"
	[ "$z0" = "$z1" ] || return 1
	cp "$state/pre-zc.json" "$cfg"
	c config_reload >/dev/null
}
slate_check reload zerocopy-live zerocopy

# --- copy progress counters: a real EXTENDED COPY (libiscsi) counts in namespace_list ---
# (a copy into a mem namespace ends in milliseconds, so the counters mid-copy
# are checked by tests/unit core_copy; here: a real client's copy is counted,
# and the in-flight counters are back to 0 once it ended)
copy_counters() {
	command -v iscsi-test-cu >/dev/null || {
		echo "iscsi-test-cu missing"
		return 1
	}
	c namespace_create name=x0 backend=mem size=16M &&
		c iscsi_lun_map target="$IQB" lun=3 namespace=x0 || return 1
	timeout -k 10 120 iscsi-test-cu --dataloss --test=ALL.ExtendedCopy.Simple \
		--initiator-name=iqn.2026-12.io.slate:copy-test "iscsi://127.0.0.1:$iport/$IQB/3" \
		>"$state/xcopy.txt" 2>&1 || {
		cat "$state/xcopy.txt"
		return 1
	}
	grep -q "passed" "$state/xcopy.txt" || return 1
	c --json namespace_list >"$state/xcopy-ns.json" || return 1
	python3 - "$state/xcopy-ns.json" <<'EOF' || return 1
import json, sys
ns = [n for n in json.load(open(sys.argv[1])) if n["name"] == "x0"][0]
cp = ns["copy"]
print("copy:", cp)
assert cp["ops"] >= 1 and cp["bytes"] > 0, "the copy was not counted"
assert cp["active_bytes"] == 0 and cp["active_done"] == 0, "in-flight counters not taken back"
EOF
	# nothing running: progress says so and exits 0
	c progress x0 --once | tee "$state/xcopy-progress.txt" &&
		grep -qx "x0: sanitize never" "$state/xcopy-progress.txt" || return 1
	c iscsi_lun_unmap target="$IQB" lun=3 && c namespace_delete name=x0
}
slate_check reload copy-counters copy_counters

slate_stop
rc=$?
stop_ok() {
	echo "slated exit status $rc"
	[ "$rc" = 0 ] && slate_sanitizer_clean "$daemon_log"
}
slate_check reload clean-exit stop_ok
[ "$slate_nfail" = 0 ]
