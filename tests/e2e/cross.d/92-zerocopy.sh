# tests/e2e/cross.d/92-zerocopy.sh — sourced by tests/e2e/cross-linux.sh.
# Zero-copy sends (options.zerocopy_send_min, issue 13) with Linux's own
# hosts: the option is turned on by a SIGHUP reload of the running config
# (config_save + the option), 4 MiB of random data written through the NVMe
# host at 200 MiB are read back O_DIRECT in 128 KiB requests by both hosts
# (kernel NVMe/TCP C2HData, open-iscsi Data-In) and must equal what was
# written; slated's zc_sends must have risen and every send been notified;
# then the option is reloaded off.  Runs in e2e_cross's state half (parts
# [1-6]*,90-pi-*,9[1-9]-*); alone (CROSS_PARTS='92-*') the whole VM run took 61 s, the part
# itself a few seconds (two reloads, 4 MiB written, 8 MiB read).

zc_counts() { ctl --json reactor_stats | python3 -c 'import json,sys
t = json.load(sys.stdin)["total"]; print(t["zc_sends"], t["zc_notifs"])'; }
zc_reload() { # BYTES -> the running config with options.zerocopy_send_min = BYTES, by SIGHUP
	ctl --json config_save include_secrets=true >"$state/zc-base.json" || return 1
	python3 - "$state/zc-base.json" "$state/slate.json" "$1" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
d.setdefault("options", {})["zerocopy_send_min"] = int(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
	local first
	first=$(($(wc -l <"$log") + 1))
	kill -HUP "$SLATE_PID" || return 1
	wait_for 20 sh -c "tail -n +$first '$log' | grep -q 'zero-copy sends'"
	tail -n +"$first" "$log" | grep 'zero-copy sends'
}

zc_linux_reads() {
	zc_reload 65536 || return 1
	head -c 4M /dev/urandom >"$state/zc.pat"
	dd if="$state/zc.pat" of="$NVDEV" bs=1M seek=200 oflag=direct conv=fsync status=none || return 1
	local z0 n0 z1 n1
	read -r z0 n0 <<<"$(zc_counts)"
	dd if="$NVDEV" of="$state/zc.nv" bs=128k skip=1600 count=32 iflag=direct status=none &&
		dd if="$SD" of="$state/zc.sd" bs=128k skip=1600 count=32 iflag=direct status=none || return 1
	sleep 0.5
	read -r z1 n1 <<<"$(zc_counts)"
	echo "zero-copy sends during the reads: $((z1 - z0)), notified $((n1 - n0))"
	cmp "$state/zc.pat" "$state/zc.nv" && cmp "$state/zc.pat" "$state/zc.sd" &&
		[ $((z1 - z0)) -ge 32 ] && [ $((n1 - n0)) = $((z1 - z0)) ]
}
check zerocopy-linux-reads zc_linux_reads
check zerocopy-off zc_reload 0
