# tests/e2e/cross.d/50-thin.sh — sourced by tests/e2e/cross-linux.sh.
# Thin provisioning of the shared namespace (a sparse file: the file system
# is the provisioning map), through both hosts:
#   - what each host is told: `sg_vpd -p lbpv` (LBPU=1), READ CAPACITY(16)
#     LBPME/LBPRZ, `nvme id-ns` NSFEAT THINP and DLFEAT;
#   - `blkdiscard` on the NVMe device frees the range in the backing file
#     (`du` shrinks), the iSCSI host reads zeroes there and GET LBA STATUS
#     says deallocated; a write makes it mapped again;
#   - data written over iSCSI reads back over NVMe, `sg_unmap` frees it
#     again and NVMe reads zeroes; NUSE < NSZE after the discards.
# Ranges are 1 MiB aligned, past what the earlier parts wrote, inside the
# first 256 MiB (the namespace may have grown since).

thin_img=$state/shared.img
thin_kib() { sync; du -k "$thin_img" | awk '{print $1}'; }
thin_lbas() { sg_get_lba_status -bb --lba="$1" "$SD" 2>&1; } # 0 mapped, 1 deallocated
nv_idns() { nvme id-ns "$NVDEV" -o json | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
zeroes_at() { # zeroes_at DEV MIB COUNT_MIB
	cmp -n $(($3 << 20)) <(dd if="$1" iflag=direct bs=1M skip="$2" count="$3" 2>/dev/null) /dev/zero
}

thin_advertised() {
	sg_vpd -p lbpv "$SD" | tee "$state/lbpv.txt"
	grep -q 'Unmap command supported (LBPU): 1' "$state/lbpv.txt" || return 1
	grep -qi 'provisioning type: 2\|thin' "$state/lbpv.txt" || return 1
	sg_readcap --long "$SD" | tee "$state/readcap.txt"
	grep -q 'lbpme=1' "$state/readcap.txt" && grep -q 'lbprz=1' "$state/readcap.txt" || return 1
	echo "NVMe nsfeat $(nv_idns 'd["nsfeat"]') dlfeat $(nv_idns 'd["dlfeat"]')"
	[ $(($(nv_idns 'd["nsfeat"]') & 1)) = 1 ] && [ $(($(nv_idns 'd["dlfeat"]') & 7)) = 1 ]
}
check thin-advertised-both thin_advertised

nvme_discard_frees() {
	dd if=/dev/urandom of="$state/thin-a.bin" bs=1M count=16 2>/dev/null
	dd if="$state/thin-a.bin" of="$NVDEV" oflag=direct bs=1M seek=160 2>/dev/null || return 1
	# The iSCSI host reads what the NVMe host wrote.
	cmp <(dd if="$SD" iflag=direct bs=1M skip=160 count=16 2>/dev/null) "$state/thin-a.bin" ||
		return 1
	[ "$(thin_lbas $((160 * 2048)))" = 0 ] || { echo "not mapped after a write"; return 1; }
	local before after
	before=$(thin_kib)
	blkdiscard -o $((160 << 20)) -l $((16 << 20)) "$NVDEV" || {
		nvme dsm "$NVDEV" -n 1 --ad -s $((160 * 2048)) -b 2048 2>&1
		nvme error-log "$NVCTRL" -e 2 2>&1 | head -40
		dmesg | tail -8
		return 1
	}
	after=$(thin_kib)
	echo "backing file: ${before} KiB -> ${after} KiB after discarding 16 MiB over NVMe"
	[ $((before - after)) -ge $((15 * 1024)) ] || return 1
	zeroes_at "$SD" 160 16 || { echo "iSCSI host does not read zeroes"; return 1; }
	echo "GET LBA STATUS at the discarded range: $(thin_lbas $((160 * 2048)))"
	[ "$(thin_lbas $((160 * 2048)))" = 1 ] || return 1
	# Writing one block maps it again (a 4 KiB file-system block).
	dd if=/dev/urandom of="$NVDEV" oflag=direct bs=4k seek=$((160 * 256)) count=1 2>/dev/null ||
		return 1
	echo "after a write: $(thin_lbas $((160 * 2048)))"
	[ "$(thin_lbas $((160 * 2048)))" = 0 ] && [ "$(thin_lbas $((161 * 2048)))" = 1 ]
}
check nvme-discard-frees-space nvme_discard_frees

scsi_unmap_frees() {
	dd if=/dev/urandom of="$state/thin-b.bin" bs=1M count=16 2>/dev/null
	dd if="$state/thin-b.bin" of="$SD" oflag=direct bs=1M seek=192 2>/dev/null || return 1
	cmp <(dd if="$NVDEV" iflag=direct bs=1M skip=192 count=16 2>/dev/null) "$state/thin-b.bin" ||
		{ echo "NVMe host does not read what the iSCSI host wrote"; return 1; }
	local before after
	before=$(thin_kib)
	sg_unmap --lba=$((192 * 2048)) --num=$((16 * 2048)) "$SD" || return 1
	after=$(thin_kib)
	echo "backing file: ${before} KiB -> ${after} KiB after UNMAP of 16 MiB over iSCSI"
	[ $((before - after)) -ge $((15 * 1024)) ] || return 1
	zeroes_at "$NVDEV" 192 16 || { echo "NVMe host does not read zeroes"; return 1; }
	[ "$(thin_lbas $((192 * 2048)))" = 1 ]
}
check scsi-unmap-frees-space scsi_unmap_frees

nvme_nuse() {
	local nuse nsze
	nuse=$(nv_idns 'd["nuse"]') nsze=$(nv_idns 'd["nsze"]')
	echo "NVMe nuse $nuse of nsze $nsze; backing file $(thin_kib) KiB"
	[ "$nuse" -lt "$nsze" ]
}
check nvme-nuse-below-nsze nvme_nuse
