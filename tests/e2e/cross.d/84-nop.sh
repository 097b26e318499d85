# tests/e2e/cross.d/84-nop.sh — sourced by tests/e2e/cross-linux.sh.
# iSCSI NOP-In pings with the Linux initiator: a live reload sets
# options.nop_interval_ms to 1 s (nop_timeout_ms 4 s) and the iSCSI host
# logs in again (a new connection's guard starts with the new interval);
# over 6 s of an idle disk slated pings it several times and the kernel
# (libiscsi) answers every ping (daemon_status "iscsi_nop": sent grows,
# answered keeps up, no timeouts), the session stays up and its disk reads.
# The old options come back by a second reload.

nop_counts() { # -> "SENT ANSWERED TIMEOUTS"
	ctl --json daemon_status | python3 -c 'import json,sys; n=json.load(sys.stdin)["iscsi_nop"]; print(n["sent"], n["answered"], n["timeouts"])'
}
nop_run() {
	cp "$state/slate.json" "$state/slate.json.pre-nop"
	sed -i 's/"options": {/"options": {"nop_interval_ms": 1000, "nop_timeout_ms": 4000, /' "$state/slate.json"
	ctl config_reload >/dev/null || return 1
	[ "$(ctl --json daemon_status | python3 -c 'import json,sys; print(json.load(sys.stdin)["iscsi_nop"]["interval_ms"])')" = 1000 ] || return 1
	sd_relogin >/dev/null 2>&1 || return 1
	read -r s0 a0 t0 <<<"$(nop_counts)"
	sleep 6
	read -r s1 a1 t1 <<<"$(nop_counts)"
	echo "NOP-In: sent $s0 -> $s1, answered $a0 -> $a1, timeouts $t0 -> $t1"
	[ $((s1 - s0)) -ge 3 ] || return 1           # pinged every quiet second or so
	[ $((a1 - a0)) -ge $((s1 - s0 - 1)) ] || return 1 # the kernel answered (one may be in flight)
	[ "$t1" = "$t0" ] || return 1                # none unanswered
	iscsiadm -m session 2>/dev/null | grep -q "$XIQN" || return 1
	dd if="$SD" of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null
}
nop_restore() {
	mv "$state/slate.json.pre-nop" "$state/slate.json" && ctl config_reload >/dev/null
}
check nop-pings-answered-by-linux nop_run
check nop-options-restored nop_restore
