# tests/e2e/cross.d/20-sanitize.sh — sourced by tests/e2e/cross-linux.sh.
# One sanitize operation of the namespace (the core's, src/core/sanitize.c),
# started through one protocol and seen through the other:
#  (a) SANITIZE OVERWRITE over iSCSI (sg_sanitize, IMMED) -> NVMe writes fail
#      with Sanitize In Progress and `nvme sanitize-log` shows the progress;
#      once it is over, I/O works and both hosts read the pattern back;
#  (b) NVMe Sanitize Block Erase (`nvme sanitize`) -> SCSI commands get NOT
#      READY, SANITIZE IN PROGRESS with a progress indication (sg_turs,
#      sg_requests --progress); `nvme sanitize-log` then shows the
#      completion and both hosts read zeroes.
# The namespace is paced at 32 MiB/s (cross-linux.sh's namespace_create
# sanitize_rate_mibps): 256 MiB take 8 s, long enough to watch even on a
# loaded machine (at 64 MiB/s a block erase ended before sg_requests ran once).

san_log() { nvme sanitize-log "$NVCTRL" 2>&1; }
# SSTAT bits 2:0: 1 completed successfully, 2 in progress, 3 failed.
san_status() { echo $(($(san_log | awk '/SSTAT/ {print $NF}') & 7)); }
san_done_ok() { [ "$(san_status)" = 1 ]; }
# od of one block read through each host, bypassing their caches.
sd_block() { dd if="$SD" bs=512 skip="$1" count=1 iflag=direct status=none | od -v -An -tx1 | tr -d ' \n'; }
nv_block() {
	nvme read "$NVDEV" -s "$1" -c 0 -z 512 -d "$state/nvread.bin" >/dev/null 2>&1 || return 1
	od -v -An -tx1 "$state/nvread.bin" | tr -d ' \n'
}

sanitize_scsi_to_nvme() {
	printf 'SLAT' >"$state/pattern.bin"
	local want
	want=$(for i in $(seq 128); do printf '534c4154'; done)
	sg_sanitize --overwrite --pattern="$state/pattern.bin" --quick --early "$SD" || return 1
	# In progress: an NVMe write to the same namespace is refused...
	if nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero >"$state/san-write.txt" 2>&1; then
		cat "$state/san-write.txt"
		echo "NVMe write succeeded during an iSCSI host's sanitize"
		return 1
	fi
	cat "$state/san-write.txt"
	grep -qi 'sanitize.in.progress\|SANITIZE_IN_PROGRESS\|0x[0-9a-f]*1d\b' "$state/san-write.txt" ||
		return 1
	# ... and the Sanitize Status log shows it running, with progress.
	san_log | tee "$state/san-log-a.txt"
	[ "$(($(awk '/SSTAT/ {print $NF}' "$state/san-log-a.txt") & 7))" = 2 ] || return 1
	local sprog
	sprog=$(awk '/SPROG/ {print $NF}' "$state/san-log-a.txt")
	echo "SPROG $sprog"
	[ -n "$sprog" ] && [ "$sprog" -lt 65535 ] || return 1
	wait_for 30 san_done_ok || { san_log; return 1; }
	san_log
	sg_turs "$SD" >/dev/null 2>&1 # a unit attention, if any, goes here
	sg_turs "$SD" || return 1
	local s n
	s=$(sd_block 1000)
	n=$(nv_block 1000)
	echo "block 1000: iSCSI ${s:0:16}... NVMe ${n:0:16}..."
	[ "$s" = "$want" ] && [ "$n" = "$want" ] || return 1
	nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero
}
check sanitize-scsi-to-nvme sanitize_scsi_to_nvme

sanitize_nvme_to_scsi() {
	nvme sanitize "$NVCTRL" --sanact=start-block-erase >"$state/san-cmd.txt" 2>&1 ||
		nvme sanitize "$NVCTRL" --sanact=2 >"$state/san-cmd.txt" 2>&1 || {
		cat "$state/san-cmd.txt"
		return 1
	}
	cat "$state/san-cmd.txt"
	# SCSI: NOT READY, SANITIZE IN PROGRESS (04h/1Bh), with progress in the sense data.
	if sg_turs "$SD" >"$state/san-tur.txt" 2>&1; then
		cat "$state/san-tur.txt"
		echo "TEST UNIT READY succeeded during an NVMe host's sanitize"
		return 1
	fi
	cat "$state/san-tur.txt"
	grep -qi 'not ready' "$state/san-tur.txt" || return 1
	sg_requests "$SD" 2>&1 | tee "$state/san-rs.txt"
	grep -qi 'sanitize in progress' "$state/san-rs.txt" || return 1
	sg_requests --progress "$SD" 2>&1 | tee "$state/san-rsp.txt"
	grep -q '% done' "$state/san-rsp.txt" || return 1
	wait_for 30 san_done_ok || { san_log; return 1; }
	san_log | tee "$state/san-log-b.txt"
	sg_turs "$SD" >/dev/null 2>&1
	sg_turs "$SD" || return 1
	local s n
	s=$(sd_block 1000)
	n=$(nv_block 1000)
	echo "block 1000 after block erase: iSCSI ${s:0:16}... NVMe ${n:0:16}..."
	[ "$s" = "$(printf '0%.0s' $(seq 1024))" ] && [ "$n" = "$s" ]
}
check sanitize-nvme-to-scsi sanitize_nvme_to_scsi

# (c) A crash in the middle: slated is killed (SIGKILL) during an NVMe overwrite
#     and started again; the namespace's metadata said "running", so the
#     sanitize is in progress again at once (slatectl namespace_list) and
#     starts over from the first block (SBC-4 4.11, NVMe 8.21: a sanitize
#     continues after power on).  Once it completes, both hosts reconnect,
#     read the pattern, and the Sanitize Status log still names the
#     interrupted command (SCDW10).
ns_sanitize_state() {
	ctl --json namespace_list | python3 -c 'import json,sys
for n in json.load(sys.stdin):
    if n["name"] == "shared": print(n["state"]["sanitize"])'
}
ns_sanitize_is() { [ "$(ns_sanitize_state)" = "$1" ]; }
sanitize_survives_crash() {
	nvme sanitize "$NVCTRL" --sanact=start-overwrite --owpass=1 --ovrpat=0x5a5a5a5a \
		>"$state/san-cmd.txt" 2>&1 ||
		nvme sanitize "$NVCTRL" --sanact=3 --owpass=1 --ovrpat=0x5a5a5a5a \
			>"$state/san-cmd.txt" 2>&1 || {
		cat "$state/san-cmd.txt"
		return 1
	}
	sleep 1
	[ "$(ns_sanitize_state)" = running ] || return 1
	slate_stop KILL
	echo "slated killed during the overwrite"
	slate_start "$state/run" "$state/slate.json" "$PORT" "$log" || return 1
	local st
	st=$(ns_sanitize_state)
	echo "after the restart: sanitize $st"
	[ "$st" = running ] || return 1
	grep 'interrupted by a restart' "$log" || return 1
	wait_for 60 ns_sanitize_is done || return 1
	echo "completed after the restart"
	nv_reconnect || return 1
	sd_relogin || return 1
	local want s n
	want=$(for i in $(seq 128); do printf '5a5a5a5a'; done)
	s=$(sd_block 4242)
	n=$(nv_block 4242)
	echo "block 4242: iSCSI ${s:0:16}... NVMe ${n:0:16}..."
	[ "$s" = "$want" ] && [ "$n" = "$want" ] || return 1
	san_log | tee "$state/san-log-c.txt"
	[ "$(($(awk '/SSTAT/ {print $NF}' "$state/san-log-c.txt") & 7))" = 1 ] || return 1
	[ "$(($(awk '/SCDW10/ {print $NF}' "$state/san-log-c.txt")))" = $((0x13)) ]
}
check sanitize-survives-crash sanitize_survives_crash
