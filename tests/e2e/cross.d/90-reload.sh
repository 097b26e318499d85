# tests/e2e/cross.d/90-reload.sh — sourced by tests/e2e/cross-linux.sh.
# Live reconfiguration with both Linux hosts connected to "shared": the
# running config (config_save) is edited like an operator would — a new
# namespace "rl" attached as NSID 7 of the connected subsystem and as LUN 0
# of a new target, a namespace "gone" (mapped to another target) removed,
# namespace "opt" (NSID 8) write-protected — and applied with SIGHUP (what
# `systemctl reload` sends).  Both hosts keep their controller and session
# (same cntlid, same TSIH: no reconnect), the data they wrote before reads
# back the same, I/O keeps working, and the NVMe host sees NSID 7 appear and
# NSID 8 turn read-only through the events.  Reloading the original file
# takes it all back (NSID 7 and 8 detached from the connected host).

rl_cntlid() { ctl --json nvmf_ctrl_list | python3 -c 'import json,sys
print(" ".join(str(c["cntlid"]) for c in json.load(sys.stdin) if c["subnqn"] == sys.argv[1]))' "$XNQN"; }
rl_tsih() { ctl --json iscsi_session_list | python3 -c 'import json,sys
print(" ".join(str(s["tsih"]) for s in json.load(sys.stdin) if s["target"] == sys.argv[1]))' "$XIQN"; }
rl_nsdev() { # NSID -> /dev/nvmeXnY of the connected subsystem
	local d n
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$XNQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = "$1" ] || continue
			n=${n##*/}
			[ -b "/dev/$n" ] && { echo "/dev/$n"; return 0; }
		done
	done
	return 1
}
rl_hup() { # send SIGHUP and wait for the reload's outcome line in the log
	local first
	first=$(($(wc -l <"$log") + 1))
	kill -HUP "$SLATE_PID" || return 1
	wait_for 20 sh -c "tail -n +$first '$log' | grep -q 'reload .*: [0-9]* changes* applied\|reload refused or stopped'"
	tail -n +"$first" "$log" | grep 'reload'
	! tail -n +"$first" "$log" | grep -q 'reload refused or stopped'
}

reload_keeps_hosts() {
	ctl namespace_create name=gone backend=mem size=16M &&
		ctl iscsi_target_create name="$XIQN-gone" &&
		ctl iscsi_lun_map target="$XIQN-gone" lun=0 namespace=gone &&
		ctl namespace_create name=opt backend=mem size=16M &&
		ctl nvmf_ns_attach nqn="$XNQN" nsid=8 namespace=opt || return 1
	wait_for 10 rl_nsdev 8 || { echo "NSID 8 did not appear"; return 1; }
	local optdev cnt tsih
	optdev=$(rl_nsdev 8)
	cp "$state/slate.json" "$state/slate.orig.json"
	ctl --json config_save >"$state/base.json" || return 1
	# the edit: rl added (NSID 7, LUN 0 of a new target), gone removed, opt write-protected
	python3 - "$state/base.json" "$state/slate.json" "$XNQN" "$XIQN-rl" "$XIQN-gone" <<'PY' || return 1
import json, sys
base, out, nqn, iqn_rl, iqn_gone = sys.argv[1:]
doc = json.load(open(base))
cfg = doc["config"]
keep = []
for e in cfg:
    p = e["params"]
    if p.get("name") == "gone" or p.get("namespace") == "gone" or p.get("name") == iqn_gone or p.get("target") == iqn_gone:
        continue
    if e["method"] == "namespace_create" and p["name"] == "opt":
        p["write_protect"] = True
    keep.append(e)
# config_save's order: namespaces, targets, maps, portals, subsystems, listeners
at = next(i for i, e in enumerate(keep) if e["method"] == "iscsi_portal_add")
keep[at:at] = [
    {"method": "namespace_create", "params": {"name": "rl", "backend": "mem", "size": "32M"}},
    {"method": "iscsi_target_create", "params": {"name": iqn_rl}},
    {"method": "iscsi_lun_map", "params": {"target": iqn_rl, "lun": 0, "namespace": "rl"}},
]
at = next(i for i, e in enumerate(keep) if e["method"] == "nvmf_listener_add")
keep[at:at] = [{"method": "nvmf_ns_attach", "params": {"nqn": nqn, "nsid": 7, "namespace": "rl"}}]
# the options (allowed_dirs: later parts make data files in the state dir) stay as they were
json.dump({"options": doc.get("options", {}), "config": keep}, open(out, "w"), indent=1)
PY
	ctl config_reload dry_run=true || return 1
	# data from both hosts before the reload
	dd if=/dev/urandom of="$state/rl-a" bs=1M count=1 status=none
	dd if=/dev/urandom of="$state/rl-b" bs=1M count=1 status=none
	dd if="$state/rl-a" of="$SD" bs=1M seek=100 oflag=direct conv=fsync status=none &&
		dd if="$state/rl-b" of="$NVDEV" bs=1M seek=101 oflag=direct conv=fsync status=none || return 1
	cnt=$(rl_cntlid)
	tsih=$(rl_tsih)
	echo "before: NVMe cntlid $cnt, iSCSI TSIH $tsih"
	[ -n "$cnt" ] && [ -n "$tsih" ] || return 1
	rl_hup || return 1
	echo "after: NVMe cntlid $(rl_cntlid), iSCSI TSIH $(rl_tsih)"
	[ "$(rl_cntlid)" = "$cnt" ] && [ "$(rl_tsih)" = "$tsih" ] || { echo "a host reconnected"; return 1; }
	# the data each host wrote, read back through the other one, then I/O after
	dd if="$NVDEV" bs=1M skip=100 count=1 iflag=direct status=none | cmp - "$state/rl-a" &&
		dd if="$SD" bs=1M skip=101 count=1 iflag=direct status=none | cmp - "$state/rl-b" || return 1
	dd if="$state/rl-b" of="$SD" bs=1M seek=102 oflag=direct conv=fsync status=none &&
		dd if="$NVDEV" bs=1M skip=102 count=1 iflag=direct status=none | cmp - "$state/rl-b" || return 1
	# what the hosts see of the changes
	wait_for 20 rl_nsdev 7 || { echo "NSID 7 did not appear"; return 1; }
	echo "NSID 7 appeared as $(rl_nsdev 7): $(blockdev --getsize64 "$(rl_nsdev 7)") bytes"
	[ "$(blockdev --getsize64 "$(rl_nsdev 7)")" = $((32 << 20)) ] || return 1
	wait_for 20 test "$(cat "/sys/block/${optdev#/dev/}/ro")" = 1 || { echo "NSID 8 not read-only"; return 1; }
	echo "NSID 8 ($optdev) read-only"
	ctl targets
	ctl --json iscsi_target_list | grep -q "$XIQN-gone" && return 1
	ctl --json namespace_list | grep -q '"gone"' && return 1
	# back: the original file removes rl and opt (detached from the connected host)
	cp "$state/base.json" "$state/slate.json"
	python3 - "$state/slate.json" <<'PY' || return 1
import json, sys
doc = json.load(open(sys.argv[1]))
cfg = doc["config"]
drop = lambda p: "gone" in (p.get("name"), p.get("namespace")) or "opt" in (p.get("name"), p.get("namespace")) or str(p.get("name", "")).endswith("-gone") or str(p.get("target", "")).endswith("-gone")
json.dump({"options": doc.get("options", {}), "config": [e for e in cfg if not drop(e["params"])]}, open(sys.argv[1], "w"))
PY
	rl_hup || return 1
	wait_for 20 sh -c "! test -b $optdev" || { echo "$optdev still there"; return 1; }
	! rl_nsdev 7 >/dev/null || { echo "NSID 7 still there"; return 1; }
	[ "$(rl_cntlid)" = "$cnt" ] && [ "$(rl_tsih)" = "$tsih" ] || { echo "a host reconnected"; return 1; }
	dd if="$SD" bs=1M skip=102 count=1 iflag=direct status=none | cmp - "$state/rl-b" || return 1
	cp "$state/slate.orig.json" "$state/slate.json"
}
check reload-keeps-both-hosts reload_keeps_hosts
