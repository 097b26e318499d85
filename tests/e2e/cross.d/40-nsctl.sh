# tests/e2e/cross.d/40-nsctl.sh — sourced by tests/e2e/cross-linux.sh.
# Runtime namespace changes, each reaching both connected hosts through the
# core's events, without reconnecting:
#   - slatectl namespace_resize grows "shared": the NVMe host rescans on
#     Namespace Attribute Changed and sees the new size; the iSCSI host gets
#     CAPACITY DATA HAS CHANGED and sees the size after a rescan.  Shrinking
#     the exported namespace is refused.
#   - NVMe Set Features 84h (Namespace Write Protection Config) write-protects
#     the namespace for the iSCSI host: DATA PROTECT on WRITE, SWP=1 in the
#     control mode page; cleared again with WPS 0.
#   - slatectl namespace_set write_protect=true: both hosts see it (NVMe
#     read-only after the event, iSCSI WP in the mode header and DATA
#     PROTECT); cleared again.
#   - a throw-away namespace attached and mapped at runtime: the NVMe host
#     sees it appear and go (attach/detach), the iSCSI host gets REPORTED
#     LUNS DATA HAS CHANGED; permanent write protection (84h WPS 3) is tried
#     there, never on "shared" (it cannot be undone).

nv_sectors() { cat "/sys/block/${NVDEV#/dev/}/size"; }
nv_nsze() { nvme id-ns "$NVDEV" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nsze"])'; }
nv_ro_now() { cat "/sys/block/${NVDEV#/dev/}/ro"; }
sd_swp_now() { sdparm --quiet --page=co --get=SWP "$SD" | awk '{print $2}'; }
# WRITE(10) of one block at LBA 0 straight to the iSCSI LU (no page cache, no ro flag).
sd_write1() { sg_raw -s 512 -i /dev/zero "$SD" 2a 00 00 00 00 00 00 00 01 00 2>&1; }
# Run TEST UNIT READY until no unit attention is left; prints what came back.
sd_drain_ua() {
	local i
	for i in 1 2 3 4; do
		sg_turs -v "$SD" 2>&1 || true
	done
}
nv_feat84() { # nvme get-feature 84h: the current WPS as a decimal number
	local v
	v=$(nvme get-feature "$NVCTRL" -n "${1:-1}" -f 0x84 2>&1 |
		sed -n 's/.*[Cc]urrent value: *\(0x[0-9a-fA-F]*\).*/\1/p' | head -1)
	[ -n "$v" ] && echo $((v & 7))
}
ns_blocks() { # namespace_list's num_blocks of namespace $1
	ctl --json namespace_list | python3 -c '
import json, sys
print([n["num_blocks"] for n in json.load(sys.stdin) if n["name"] == sys.argv[1]][0])' "$1"
}

resize_grow() {
	local before want uas
	before=$(nv_sectors)
	want=$((320 * 2048)) # 320 MiB in 512-byte sectors
	echo "before: NVMe $before sectors, iSCSI $(blockdev --getsz "$SD") sectors"
	uas=$(dmesg | grep -ci 'capacity data has changed')
	ctl namespace_resize name=shared size=320M || return 1
	# Namespace Attribute Changed -> the kernel re-reads Identify: no reconnect.
	wait_for 10 test "$(nv_sectors)" = "$want" || { echo "NVMe host sees $(nv_sectors)"; return 1; }
	echo "NVMe: /sys/block size $(nv_sectors), Identify NSZE $(nv_nsze)"
	[ "$(nv_nsze)" = "$want" ] || return 1
	# The iSCSI host: the next command gets CAPACITY DATA HAS CHANGED.
	sd_drain_ua >"$state/cap-ua.txt"
	cat "$state/cap-ua.txt"
	dmesg | grep -i 'capacity data has changed' | tail -2
	if ! grep -qi 'capacity data has changed' "$state/cap-ua.txt" &&
		[ "$(dmesg | grep -ci 'capacity data has changed')" -le "$uas" ]; then
		echo "no CAPACITY DATA HAS CHANGED on the iSCSI host"
		return 1
	fi
	echo 1 >"/sys/block/${SD#/dev/}/device/rescan"
	wait_for 10 test "$(blockdev --getsz "$SD")" = "$want" ||
		{ echo "iSCSI host sees $(blockdev --getsz "$SD") sectors after rescan"; return 1; }
	echo "iSCSI: $(blockdev --getsz "$SD") sectors after rescan"
	# The new blocks work from both hosts: the NVMe host writes the last one, iSCSI reads it.
	printf 'slate-grown-%0500d' 0 | head -c 512 >"$state/tail.bin"
	nvme write "$NVDEV" -s $((want - 1)) -c 0 -z 512 -d "$state/tail.bin" || return 1
	dd if="$SD" bs=512 skip=$((want - 1)) count=1 iflag=direct 2>/dev/null | cmp - "$state/tail.bin"
}
check resize-grow-both-hosts resize_grow

resize_shrink_refused() {
	if ctl namespace_resize name=shared size=128M >"$state/shrink.txt" 2>&1; then
		cat "$state/shrink.txt"
		echo "shrinking an exported namespace was accepted"
		return 1
	fi
	cat "$state/shrink.txt"
	grep -qi 'force' "$state/shrink.txt" || return 1
	echo "namespace_list: $(ns_blocks shared) blocks"
	[ "$(ns_blocks shared)" = 655360 ]
}
check resize-shrink-refused-while-exported resize_shrink_refused

wp84_nvme_to_scsi() {
	sd_drain_ua >/dev/null
	nvme set-feature "$NVCTRL" -n 1 -f 0x84 -v 1 || return 1
	echo "NVMe get-feature 84h: $(nv_feat84)"
	[ "$(nv_feat84)" = 1 ] || return 1
	sd_drain_ua >"$state/wp84-ua.txt"
	cat "$state/wp84-ua.txt"
	grep -qi 'mode parameters changed' "$state/wp84-ua.txt" || return 1
	local v
	v=$(sd_swp_now)
	echo "iSCSI host: control page SWP=$v"
	[ "$v" = 1 ] || return 1
	sd_write1 >"$state/wp84-write.txt"
	cat "$state/wp84-write.txt"
	grep -qi 'data protect' "$state/wp84-write.txt" || { echo "WRITE was not refused"; return 1; }
	# The host that set it rescans too (Set Features' effects include NCC).
	wait_for 10 test "$(nv_ro_now)" = 1 && echo "NVMe host itself: read-only"
	nvme set-feature "$NVCTRL" -n 1 -f 0x84 -v 0 || return 1
	sd_drain_ua >/dev/null
	v=$(sd_swp_now)
	echo "after WPS 0: SWP=$v"
	[ "$v" = 0 ] || return 1
	sd_write1 >"$state/wp84-write2.txt"
	if grep -qi 'data protect' "$state/wp84-write2.txt"; then
		cat "$state/wp84-write2.txt"
		return 1
	fi
	wait_for 10 test "$(nv_ro_now)" = 0
}
check wp84-nvme-to-scsi wp84_nvme_to_scsi

wp84_invalid() {
	# WPS 5 is reserved: Invalid Field in Command, nothing changes.
	if nvme set-feature "$NVCTRL" -n 1 -f 0x84 -v 5 >"$state/wp84-bad.txt" 2>&1; then
		cat "$state/wp84-bad.txt"
		return 1
	fi
	cat "$state/wp84-bad.txt"
	grep -qi 'invalid.field\|INVALID_FIELD\|0x2\b\|0x4002' "$state/wp84-bad.txt" || return 1
	[ "$(sd_swp_now)" = 0 ]
}
check wp84-invalid-wps wp84_invalid

wp_ctl_both_hosts() {
	sd_drain_ua >/dev/null
	ctl namespace_set name=shared write_protect=true || return 1
	wait_for 10 test "$(nv_ro_now)" = 1 || { echo "NVMe disk not read-only"; return 1; }
	if nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero >"$state/ctl-wp-nv.txt" 2>&1; then
		cat "$state/ctl-wp-nv.txt"
		echo "NVMe write succeeded"
		return 1
	fi
	cat "$state/ctl-wp-nv.txt"
	sd_drain_ua >"$state/ctl-wp-ua.txt"
	grep -qi 'mode parameters changed' "$state/ctl-wp-ua.txt" || { cat "$state/ctl-wp-ua.txt"; return 1; }
	sg_modes -p 0x0a "$SD" 2>&1 | grep -i 'WP=' | head -2
	sg_modes -p 0x0a "$SD" 2>&1 | grep -q 'WP=1' || { echo "mode header WP not set"; return 1; }
	echo "control page SWP=$(sd_swp_now) (a management reason is not SWP)"
	sd_write1 >"$state/ctl-wp-sd.txt"
	cat "$state/ctl-wp-sd.txt"
	grep -qi 'data protect' "$state/ctl-wp-sd.txt" || return 1
	ctl namespace_set name=shared write_protect=false || return 1
	wait_for 10 test "$(nv_ro_now)" = 0 || { echo "NVMe disk still read-only"; return 1; }
	nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero || return 1
	sd_drain_ua >/dev/null
	sd_write1 >"$state/ctl-wp-sd2.txt"
	! grep -qi 'data protect' "$state/ctl-wp-sd2.txt"
}
check wp-ctl-both-hosts wp_ctl_both_hosts

# The NVMe host's block device for NSID $1 of $XNQN, if any (as cross-linux.sh's nv_dev).
nv_dev_nsid() {
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

scratch_attach_detach() {
	ctl namespace_create name=scratch backend=mem size=16M || return 1
	sd_drain_ua >/dev/null
	ctl nvmf_ns_attach nqn="$XNQN" namespace=scratch nsid=2 || return 1
	wait_for 10 nv_dev_nsid 2 || { echo "NSID 2 did not appear"; ls /sys/block; return 1; }
	local dev
	dev=$(nv_dev_nsid 2)
	echo "NVMe host: NSID 2 appeared as $dev"
	ctl iscsi_lun_map target="$XIQN" lun=1 namespace=scratch || return 1
	sd_drain_ua >"$state/luns-ua.txt"
	cat "$state/luns-ua.txt"
	grep -qi 'reported luns data has changed' "$state/luns-ua.txt" || return 1
	# Permanent write protection, on the throw-away namespace only.
	nvme set-feature "$NVCTRL" -n 2 -f 0x84 -v 3 || return 1
	echo "84h on NSID 2: $(nv_feat84 2)"
	if nvme set-feature "$NVCTRL" -n 2 -f 0x84 -v 0 >"$state/perm.txt" 2>&1; then
		cat "$state/perm.txt"
		echo "left permanent write protection"
		return 1
	fi
	cat "$state/perm.txt"
	grep -qi 'not.changeable\|NOT_CHANGEABLE\|0x10e\|0x410e' "$state/perm.txt" || return 1
	ctl --json namespace_list | python3 -c '
import json, sys
for n in json.load(sys.stdin):
    if n["name"] == "scratch":
        print("scratch state:", n["state"]["write_protect"])
        sys.exit(0 if "permanent" in n["state"]["write_protect"] else 1)
sys.exit(1)' || return 1
	ctl iscsi_lun_unmap target="$XIQN" lun=1 || return 1
	sd_drain_ua >"$state/luns-ua2.txt"
	grep -qi 'reported luns data has changed' "$state/luns-ua2.txt" || { cat "$state/luns-ua2.txt"; return 1; }
	ctl nvmf_ns_detach nqn="$XNQN" nsid=2 || return 1
	wait_for 10 sh -c "! test -b $dev" || { echo "$dev is still there"; return 1; }
	echo "NVMe host: NSID 2 went away"
	ctl namespace_delete name=scratch
}
check scratch-attach-detach-permanent-wp scratch_attach_detach
