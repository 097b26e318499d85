# tests/e2e/cross.d/57-anchor.sh — sourced by tests/e2e/cross-linux.sh.
# Anchored blocks (SBC-4 4.7.3.4) over iSCSI, with sg3_utils:
#   - "shared" lives on tmpfs, which cannot keep zeroed blocks allocated
#     and tell them apart: ANC_SUP=0 in VPD B2h, and WRITE SAME with ANCHOR
#     is ILLEGAL REQUEST, INVALID FIELD IN CDB;
#   - a scratch thin namespace "anch" on an ext4 file system (a loop
#     device): ANC_SUP=1; `sg_write_same --anchor --unmap` (10 and 16)
#     over written blocks makes them read zeroes while the backing file
#     keeps its space, and `sg_get_lba_status` says anchored (2); UNMAP
#     without ANCHOR then deallocates them (1) and the space goes back,
#     `sg_unmap --anchor` anchors; WRITE SAME with ANCHOR without UNMAP is
#     INVALID FIELD IN CDB.
# Uses trim_hctl/trim_drain_ua from 55-fstrim.sh.

anch_fs=$state/anchfs
anch_img=$anch_fs/anch.img
anch_lbas() { sg_get_lba_status -bb --lba="$1" "$2" 2>&1; } # 0 mapped, 1 deallocated, 2 anchored
anch_kib() { sync; du -k "$anch_img" | awk '{print $1}'; }
anch_sd_lun() {
	local hctl d
	hctl=$(trim_hctl)
	for d in /sys/class/scsi_device/"${hctl%:*}:$1"/device/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}

anch_refused_on_tmpfs() {
	sg_vpd -p lbpv "$SD" | tee "$state/lbpv-shared.txt" | grep -i 'anc'
	grep -q 'Anchored LBAs supported (ANC_SUP): 0' "$state/lbpv-shared.txt" || return 1
	# WRITE SAME(10), ANCHOR and UNMAP, 8 blocks at LBA 4096 (sg_raw shows the sense data).
	sg_raw -s 512 -i /dev/zero "$SD" 41 18 00 00 10 00 00 00 08 00 >"$state/ws-anchor.txt" 2>&1
	cat "$state/ws-anchor.txt"
	grep -qi 'illegal request' "$state/ws-anchor.txt" && grep -qi 'invalid field in cdb' "$state/ws-anchor.txt"
}
check anchor-refused-anc-sup-0 anch_refused_on_tmpfs

ANCH_SD=
anch_setup() {
	local hctl h c t
	mkdir -p "$anch_fs"
	truncate -s 256M "$state/anchfs.ext4" && mkfs.ext4 -q -F "$state/anchfs.ext4" || return 1
	mount -o loop "$state/anchfs.ext4" "$anch_fs" || return 1
	ctl namespace_create name=anch backend=file path="$anch_img" size=64M || return 1
	ctl iscsi_lun_map target="$XIQN" lun=2 namespace=anch || return 1
	trim_drain_ua
	hctl=$(trim_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t 2" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 anch_sd_lun 2 || { echo "LUN 2 did not appear"; return 1; }
	ANCH_SD=$(anch_sd_lun 2)
	echo "LUN 2 (ext4-backed): $ANCH_SD"
	sg_vpd -p lbpv "$ANCH_SD" | tee "$state/lbpv-anch.txt" | grep -i 'anc'
	grep -q 'Anchored LBAs supported (ANC_SUP): 1' "$state/lbpv-anch.txt"
}
check anchor-ext4-anc-sup-1 anch_setup

anch_write_same() {
	local before anchored unmapped
	[ -b "$ANCH_SD" ] || return 1
	dd if=/dev/urandom of="$ANCH_SD" bs=1M count=4 oflag=direct 2>/dev/null || return 1
	before=$(anch_kib)
	echo "written: LBA 0 status $(anch_lbas 0 "$ANCH_SD"), backing file $before KiB"
	[ "$(anch_lbas 0 "$ANCH_SD")" = 0 ] || return 1
	# WRITE SAME(10) over the first MiB, WRITE SAME(16) over the second.
	sg_write_same --anchor --unmap --lba=0 --num=2048 "$ANCH_SD" || return 1
	sg_write_same --16 --anchor --unmap --lba=2048 --num=2048 "$ANCH_SD" || return 1
	anchored=$(anch_kib)
	echo "anchored 2 MiB: LBA 0 status $(anch_lbas 0 "$ANCH_SD"), LBA 2048 $(anch_lbas 2048 "$ANCH_SD")," \
		"LBA 4096 $(anch_lbas 4096 "$ANCH_SD"); backing file $anchored KiB"
	sg_get_lba_status --lba=0 --maxlen=64 "$ANCH_SD" 2>&1 | head -6
	[ "$(anch_lbas 0 "$ANCH_SD")" = 2 ] && [ "$(anch_lbas 2048 "$ANCH_SD")" = 2 ] &&
		[ "$(anch_lbas 4096 "$ANCH_SD")" = 0 ] || return 1
	[ "$anchored" -ge $((before - 64)) ] || { echo "anchoring gave space back"; return 1; }
	cmp -n $((2 << 20)) <(dd if="$ANCH_SD" iflag=direct bs=1M count=2 2>/dev/null) /dev/zero ||
		{ echo "anchored blocks do not read zeroes"; return 1; }
	# UNMAP without ANCHOR: deallocated, and the space goes back.
	sg_unmap --force --lba=0 --num=4096 "$ANCH_SD" || return 1
	unmapped=$(anch_kib)
	echo "after UNMAP: LBA 0 status $(anch_lbas 0 "$ANCH_SD"), backing file $unmapped KiB"
	[ "$(anch_lbas 0 "$ANCH_SD")" = 1 ] && [ $((anchored - unmapped)) -ge $((2000)) ] || return 1
	# UNMAP with ANCHOR anchors the third (written) MiB.
	sg_unmap --anchor --force --lba=4096 --num=2048 "$ANCH_SD" || return 1
	echo "after UNMAP with ANCHOR: LBA 4096 status $(anch_lbas 4096 "$ANCH_SD"), LBA 6144 $(anch_lbas 6144 "$ANCH_SD")"
	[ "$(anch_lbas 4096 "$ANCH_SD")" = 2 ] && [ "$(anch_lbas 6144 "$ANCH_SD")" = 0 ]
}
check anchor-write-same-sg3 anch_write_same

anch_needs_unmap() {
	[ -b "$ANCH_SD" ] || return 1
	# WRITE SAME(10) with ANCHOR but not UNMAP, 8 blocks at LBA 0.
	sg_raw -s 512 -i /dev/zero "$ANCH_SD" 41 10 00 00 00 00 00 00 08 00 >"$state/ws-anchor2.txt" 2>&1
	cat "$state/ws-anchor2.txt"
	grep -qi 'illegal request' "$state/ws-anchor2.txt" && grep -qi 'invalid field in cdb' "$state/ws-anchor2.txt"
}
check anchor-without-unmap-refused anch_needs_unmap

anch_teardown() {
	[ -n "$ANCH_SD" ] && echo 1 >"/sys/block/${ANCH_SD#/dev/}/device/delete"
	ctl iscsi_lun_unmap target="$XIQN" lun=2 || return 1
	trim_drain_ua
	ctl namespace_delete name=anch || return 1
	umount "$anch_fs"
}
check anchor-scratch-removed anch_teardown
