# tests/e2e/cross.d/60-space.sh — sourced by tests/e2e/cross-linux.sh.
# Provisioned-capacity limits (src/core/provision.c) of a scratch thin
# namespace "space" (64 MiB, hard limit 16 MiB, soft threshold 8 MiB),
# exported as LUN 0 of its own iSCSI target and NSID 1 of its own NVMe
# subsystem, with both kernel hosts connected:
#   - what the hosts are told: VPD B2h THRESHOLD EXPONENT, `sg_modes -p
#     0x1c,2` (the threshold descriptor), `sg_logs -p 0xc`, NVMe NCAP, and
#     slatectl namespace_list's counters;
#   - filling it past the soft threshold (from both hosts): the iSCSI host
#     gets THIN PROVISIONING SOFT THRESHOLD REACHED (38h/07h), the NVMe host
#     the vendor-specific event (uevent NVME_AEN=0xc00107, log page C0h);
#   - past the hard limit, writes needing space fail on both (dd: no space,
#     SCSI SPACE ALLOCATION FAILED WRITE PROTECT, NVMe Capacity Exceeded),
#     overwrites still work, and everything written before reads back
#     unchanged from both hosts, also after kill -9 and a restart of
#     slated (the limits come back from the namespace's metadata);
#   - a discard brings it back under the limit;
#   - a pool over the state directory (pool_set) refuses a write the
#     namespace's own limit allows, and SCSI calls the space not dedicated.

SNQN=nqn.2026-12.io.slate:space
SIQN=iqn.2026-12.io.slate:space
space_img=$state/space.img
SPNV= SPCTRL= SPSD=

sp_nv_dev() { # the scratch namespace's block device and controller: "/dev/nvmeXnY nvmeZ"
	local d n c
	c=$(grep -lx "$SNQN" /sys/class/nvme/nvme*/subsysnqn 2>/dev/null | head -1) || return 1
	[ -n "$c" ] || return 1
	c=$(basename "$(dirname "$c")")
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$SNQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = 1 ] || continue
			n=${n##*/}
			[ -b "/dev/$n" ] && { echo "/dev/$n $c"; return 0; }
		done
	done
	return 1
}
space_export() { # the scratch namespace's target and subsystem (again after a restart)
	ctl nvmf_subsystem_create nqn="$SNQN" &&
		ctl nvmf_subsystem_add_host nqn="$SNQN" host='*' &&
		ctl nvmf_ns_attach nqn="$SNQN" nsid=1 namespace=space &&
		ctl iscsi_target_create name="$SIQN" &&
		ctl iscsi_lun_map target="$SIQN" lun=0 namespace=space
}
space_connect() {
	nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$SNQN" || return 1
	wait_for 10 sp_nv_dev >/dev/null || return 1
	set -- $(sp_nv_dev)
	SPNV=$1 SPCTRL=/dev/$2
	SPSD=$(iscsi_login "$SIQN" 127.0.0.1 "$ISCSI_PORT") || return 1
	echo "space: NVMe $SPNV on $SPCTRL, iSCSI $SPSD"
}
space_disconnect() {
	nvme disconnect -n "$SNQN" >/dev/null 2>&1
	iscsi_logout "$SIQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
}
space_prov() { # namespace_list's provisioning counters of "space": KEY...
	ctl --json namespace_list | python3 -c '
import json, sys
p = [n for n in json.load(sys.stdin) if n["name"] == "space"][0]["provisioning"]
print(" ".join(str(p[k]) for k in sys.argv[1:]))' "$@"
}
# Drain unit attentions of the scratch disk; prints what came back.
sp_drain_ua() {
	local i
	for i in 1 2 3 4; do
		sg_turs -v "$SPSD" 2>&1 || true
	done
}
# WRITE(16) of one block at LBA $1 straight to the LU (no page cache).
sp_write1() { sg_raw -s 512 -i "$state/sp-one.bin" "$SPSD" 8a 00 $(printf '%016x' "$1" | sed 's/../& /g') 00 00 00 01 00 00 2>&1; }
sp_nvwrite1() { nvme write "$SPNV" -s "$1" -c 0 -z 512 -d "$state/sp-one.bin" 2>&1; }
sp_same() { # sp_same DEV MIB FILE: the MiB-aligned range at MIB reads back as FILE
	cmp -n "$(stat -c %s "$3")" <(dd if="$1" iflag=direct bs=1M skip="$2" \
		count=$(($(stat -c %s "$3") >> 20)) 2>/dev/null) "$3"
}

space_setup() {
	rm -f "$space_img"
	ctl namespace_create name=space path="$space_img" size=64M provision_limit=16M \
		provision_threshold=8M || return 1
	space_export || return 1
	space_connect || return 1
	head -c 512 /dev/urandom >"$state/sp-one.bin"
	# A uevent listener for the NVMe host's asynchronous event (NVME_AEN=...).
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)  # NETLINK_KOBJECT_UEVENT
s.bind((0, 1))
out = open(sys.argv[1], "a")
while True:
    for f in s.recv(65536).split(b"\0"):
        if f.startswith(b"NVME_AEN=") or f.startswith(b"SDEV_UA="):
            out.write(f.decode() + "\n")
            out.flush()' "$state/uevents.txt" &
	sp_uevent_pid=$!
	sleep 0.5
	kill -0 "$sp_uevent_pid"
}
check space-setup space_setup

space_advertised() {
	sg_vpd -p lbpv "$SPSD" | tee "$state/sp-lbpv.txt"
	grep -qi 'threshold exponent: 11' "$state/sp-lbpv.txt" || return 1
	sg_modes -p 0x1c,0x2 "$SPSD" 2>&1 | tee "$state/sp-modes.txt"
	# The page in hex: 5c 02 00 14 ... then the descriptor 80 02 00 00 00 00 00 08 (8 sets).
	tr -s ' \n' ' ' <"$state/sp-modes.txt" | grep -qi '5c 02 00 14' || return 1
	tr -s ' \n' ' ' <"$state/sp-modes.txt" | grep -qi '80 02 00 00 00 00 00 08' || return 1
	sg_logs -p 0xc "$SPSD" 2>&1 | tee "$state/sp-logs.txt"
	grep -Eqi 'available.*resource count[^0-9]*16$' "$state/sp-logs.txt" || return 1
	local ncap
	ncap=$(nvme id-ns "$SPNV" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ncap"])')
	echo "NVMe ncap $ncap (16 MiB of 512-byte blocks)"
	[ "$ncap" = 32768 ] || return 1
	echo "namespace_list: limit threshold mapped available: $(space_prov limit threshold mapped_bytes available_bytes)"
	[ "$(space_prov limit threshold)" = "16777216 8388608" ]
}
check space-advertised space_advertised

space_threshold() {
	sp_drain_ua >/dev/null
	dd if=/dev/urandom of="$state/sp-a.bin" bs=1M count=6 2>/dev/null
	dd if=/dev/urandom of="$state/sp-b.bin" bs=1M count=4 2>/dev/null
	# 6 MiB from the iSCSI host, then 4 MiB from the NVMe host: 10 MiB > 8 MiB.
	dd if="$state/sp-a.bin" of="$SPSD" oflag=direct bs=1M 2>&1 || return 1
	echo "after 6 MiB: $(space_prov mapped_bytes threshold_reached)"
	[ "$(space_prov threshold_reached)" = False ] || return 1
	dd if="$state/sp-b.bin" of="$SPNV" oflag=direct bs=1M seek=6 2>&1 || return 1
	echo "after 10 MiB: $(space_prov mapped_bytes threshold_reached)"
	[ "$(space_prov threshold_reached)" = True ] || return 1
	# The iSCSI host: 38h/07h (sg3_utils decodes it; the kernel may catch it first and log it).
	sp_drain_ua >"$state/sp-ua.txt"
	cat "$state/sp-ua.txt"
	dmesg | grep -i 'threshold' | tail -3
	grep -qi 'soft threshold reached' "$state/sp-ua.txt" ||
		dmesg | grep -qi 'thin provisioning soft threshold reached' ||
		{ echo "no THIN PROVISIONING SOFT THRESHOLD REACHED on the iSCSI host"; return 1; }
	# The NVMe host: the vendor-specific event as a uevent, and its log page.
	wait_for 10 grep -q 'NVME_AEN=0xc00107' "$state/uevents.txt" ||
		{ cat "$state/uevents.txt"; echo "no NVME_AEN uevent"; return 1; }
	grep 'NVME_AEN' "$state/uevents.txt"
	nvme get-log "$SPCTRL" --log-id=0xc0 --log-len=56 2>&1 | tee "$state/sp-c0.txt"
	grep -qi '01 00 00 00 07 00 00 00' "$state/sp-c0.txt" # NSID 1, flags reached|limit|threshold
}
check space-threshold-both-hosts space_threshold

space_limit() {
	dd if=/dev/urandom of="$state/sp-c.bin" bs=1M count=8 2>/dev/null
	# 10 MiB mapped + 8 MiB > 16 MiB: the write fails part way with no space.
	if dd if="$state/sp-c.bin" of="$SPNV" oflag=direct bs=1M seek=10 >"$state/sp-dd.txt" 2>&1; then
		cat "$state/sp-dd.txt"
		echo "dd past the hard limit succeeded"
		return 1
	fi
	cat "$state/sp-dd.txt"
	grep -qi 'no space left' "$state/sp-dd.txt" || return 1
	dmesg | grep -i 'space allocation\|capacity exceeded\|critical space' | tail -3
	echo "namespace_list: mapped available: $(space_prov mapped_bytes available_bytes)"
	[ "$(space_prov available_bytes)" -lt 1048576 ] || return 1
	# Both protocols refuse a write that needs new space...
	sp_drain_ua >/dev/null
	sp_write1 $((40 * 2048)) | tee "$state/sp-w1.txt"
	grep -qi 'space allocation failed write protect' "$state/sp-w1.txt" || return 1
	if sp_nvwrite1 $((48 * 2048)) >"$state/sp-nw1.txt"; then
		cat "$state/sp-nw1.txt"
		echo "NVMe write past the limit succeeded"
		return 1
	fi
	cat "$state/sp-nw1.txt"
	grep -qi 'CAP_EXCEEDED\|capacity exceeded\|0x4081\|0x81' "$state/sp-nw1.txt" || return 1
	# ... an overwrite needs none: it works from both.
	dd if="$state/sp-a.bin" of="$SPSD" oflag=direct bs=1M 2>&1 || return 1
	sp_nvwrite1 $((6 * 2048)) || return 1
	dd if="$state/sp-b.bin" of="$SPNV" oflag=direct bs=1M seek=6 2>&1 || return 1
	sg_logs -p 0xc "$SPSD" 2>&1 | tee "$state/sp-logs2.txt"
	grep -Eqi 'available.*resource count[^0-9]*0$' "$state/sp-logs2.txt" || return 1
	# Nothing written before changed, seen from both hosts.
	sp_same "$SPSD" 0 "$state/sp-a.bin" && sp_same "$SPNV" 0 "$state/sp-a.bin" &&
		sp_same "$SPSD" 6 "$state/sp-b.bin" && sp_same "$SPNV" 6 "$state/sp-b.bin"
}
check space-hard-limit-both-hosts space_limit

space_survives_crash() {
	space_disconnect
	slate_stop KILL
	echo "slated killed at the hard limit"
	slate_start "$state/run" "$state/slate.json" "$PORT" "$log" || return 1
	# The limits are the namespace's: reopening it without them brings them back.
	ctl namespace_create name=space path="$space_img" || return 1
	echo "after the restart: $(space_prov limit threshold mapped_bytes threshold_reached)"
	[ "$(space_prov limit threshold)" = "16777216 8388608" ] || return 1
	space_export || return 1
	nv_reconnect >/dev/null || return 1
	sd_relogin >/dev/null || return 1
	space_connect || return 1
	sp_same "$SPSD" 0 "$state/sp-a.bin" && sp_same "$SPNV" 0 "$state/sp-a.bin" &&
		sp_same "$SPSD" 6 "$state/sp-b.bin" && sp_same "$SPNV" 6 "$state/sp-b.bin" || return 1
	sp_drain_ua >/dev/null
	sp_write1 $((40 * 2048)) | tee "$state/sp-w2.txt"
	grep -qi 'space allocation failed write protect' "$state/sp-w2.txt"
}
check space-limit-survives-kill-9 space_survives_crash

space_discard_frees() {
	blkdiscard -o 0 -l $((6 << 20)) "$SPNV" || return 1
	echo "after discarding 6 MiB: $(space_prov mapped_bytes available_bytes)"
	[ "$(space_prov available_bytes)" -ge $((5 << 20)) ] || return 1
	sp_drain_ua >/dev/null
	sp_write1 $((40 * 2048)) | tee "$state/sp-w3.txt"
	! grep -qi 'space allocation' "$state/sp-w3.txt" || return 1
	sp_nvwrite1 $((48 * 2048)) || return 1
	sp_same "$SPSD" 6 "$state/sp-b.bin"
}
check space-discard-frees space_discard_frees

# A pool over the state directory (the scratch namespace and "shared" both
# live there): a limit just above what they use together refuses a write
# the namespace's own limit would allow, and SCSI reports the available
# resources as not dedicated to the LU.
space_pool() {
	ctl pool_set dir="$state" limit=1G || return 1
	local used
	used=$(ctl --json pool_list | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["mapped_bytes"])')
	ctl pool_set dir="$state" limit=$(((used >> 20) + 1))M || return 1
	ctl pool_list
	echo "space: $(space_prov available_bytes pool_bound)"
	[ "$(space_prov pool_bound)" = True ] || return 1
	sg_logs -p 0xc "$SPSD" 2>&1 | tee "$state/sp-logs3.txt"
	grep -qi 'not dedicated' "$state/sp-logs3.txt" || return 1
	dd if=/dev/urandom of="$state/sp-d.bin" bs=1M count=4 2>/dev/null
	if dd if="$state/sp-d.bin" of="$SPNV" oflag=direct bs=1M seek=20 >"$state/sp-dd2.txt" 2>&1; then
		cat "$state/sp-dd2.txt"
		echo "4 MiB written past the pool's limit"
		return 1
	fi
	cat "$state/sp-dd2.txt"
	grep -qi 'no space left' "$state/sp-dd2.txt" || return 1
	ctl pool_set dir="$state" limit=0 || return 1
	dd if="$state/sp-d.bin" of="$SPNV" oflag=direct bs=1M seek=20 2>&1 &&
		sp_same "$SPSD" 20 "$state/sp-d.bin"
}
check space-pool-limit space_pool

space_cleanup() {
	kill "$sp_uevent_pid" 2>/dev/null
	space_disconnect
	ctl iscsi_lun_unmap target="$SIQN" lun=0 &&
		ctl iscsi_target_delete name="$SIQN" &&
		ctl nvmf_ns_detach nqn="$SNQN" nsid=1 &&
		ctl nvmf_subsystem_delete nqn="$SNQN" &&
		ctl namespace_delete name=space
}
check space-cleanup space_cleanup
