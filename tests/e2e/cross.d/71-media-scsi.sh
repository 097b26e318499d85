# tests/e2e/cross.d/71-media-scsi.sh — sourced by tests/e2e/cross-linux.sh.
# Failing media on the SCSI side (issue 15), with sg3_utils and the Linux
# kernel as the hosts.  A scratch namespace "media" (32 MiB, 512-byte
# blocks, 4 physical elements interleaved every 2048 blocks) is iSCSI LUN 7
# and NVMe NSID 7 at once:
#   - `sg_get_elem_status`: 4 storage elements, each with a quarter of the
#     capacity as its associated capacity; VPD B1h DEPOPULATION TIME;
#   - `slatectl element` fails element 2: `sg_get_elem_status --filter=1`
#     lists it alone, `sg_get_lba_status --report-type=16` lists its stripes
#     (LBA 2048, 10240, ...) as "may contain unrecovered errors", a read of
#     LBA 2048 from the iSCSI disk fails with MEDIUM ERROR / UNRECOVERED READ
#     ERROR with the LBA in the information field, and the kernel logs a
#     critical medium error at sector 2048; healing the element ends it;
#   - `sg_write_long --wr_uncor` (10 and 16) makes one block unreadable:
#     report type 16 shows it, reading it fails, writing it heals it;
#     WR_UNCOR=0 and PBLOCK on a 512/512 LU are INVALID FIELD IN CDB;
#   - offline depopulation: a pattern is written over the whole disk,
#     REMOVE ELEMENT AND TRUNCATE (sg_raw) removes element 4; READ CAPACITY
#     shows the capacity less the element's share, the iSCSI host is told
#     by the CAPACITY DATA HAS CHANGED unit attention (the kernel logs it;
#     a rescan shows the size) and the NVMe host by its namespace event
#     (the block device shrinks by itself, `nvme id-ns` NSZE); the data on
#     the remaining capacity is what it was; GET PHYSICAL ELEMENT STATUS
#     shows element 4 depopulated (health FFh) with RALWD; RESTORE ELEMENTS
#     AND REBUILD brings the capacity back to both hosts;
#   - malformed CDBs: FILTER 10b, REPORT TYPE 2, an unknown element, a
#     REQUESTED CAPACITY the device cannot give: ILLEGAL REQUEST, INVALID
#     FIELD IN CDB.

MEDIA_LUN=7
MEDIA_NSID=7
MEDIA_BLOCKS=65536 # 32 MiB of 512-byte blocks
MEDIA_SD= MEDIA_NV=
media_hctl() { basename "$(readlink -f "/sys/block/${SD#/dev/}/device")"; } # H:C:T:L of $SD
media_sd_lun() {
	local hctl d
	hctl=$(media_hctl)
	for d in /sys/class/scsi_device/"${hctl%:*}:$1"/device/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}
media_nv_nsid() {
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
media_drain_ua() { for _ in 1 2 3 4; do sg_turs "$1" >/dev/null 2>&1; done; }
media_sectors() { cat "/sys/block/${1#/dev/}/size"; }

media_setup() {
	local hctl h c t
	ctl namespace_create name=media backend=file path="$state/media.img" size=32M block_size=512 \
		elements=4 element_interleave=2048 || return 1
	ctl iscsi_lun_map target="$XIQN" lun=$MEDIA_LUN namespace=media || return 1
	ctl nvmf_ns_attach nqn="$XNQN" namespace=media nsid=$MEDIA_NSID || return 1
	media_drain_ua "$SD"
	hctl=$(media_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t $MEDIA_LUN" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 media_sd_lun $MEDIA_LUN || { echo "LUN $MEDIA_LUN did not appear"; return 1; }
	MEDIA_SD=$(media_sd_lun $MEDIA_LUN)
	wait_for 20 media_nv_nsid $MEDIA_NSID || nvme ns-rescan "$NVCTRL"
	wait_for 10 media_nv_nsid $MEDIA_NSID || { echo "NSID $MEDIA_NSID did not appear"; return 1; }
	MEDIA_NV=$(media_nv_nsid $MEDIA_NSID)
	media_drain_ua "$MEDIA_SD"
	echo "media: iSCSI $MEDIA_SD, NVMe $MEDIA_NV"
}
check media-setup media_setup

# One physical element status descriptor line of sg_get_elem_status for element ID.
media_elem() { sg_get_elem_status --maxlen=1056 "$MEDIA_SD" 2>&1 | grep -i "identifier: 0x0*$1 "; }

media_gpes() {
	local out=$state/gpes.txt n
	sg_get_elem_status --maxlen=1056 "$MEDIA_SD" >"$out" 2>&1
	cat "$out"
	grep -q 'Number of descriptors: 4' "$out" || return 1
	n=$(grep -cE 'associated (capacity|LBs): 0x4000;?  health: within' "$out")
	[ "$n" = 4 ] || { echo "want 4 healthy elements of 0x4000 blocks, got $n"; return 1; }
	sg_vpd -p bdc "$MEDIA_SD" | tee "$state/bdc.txt" | grep -i depop
	grep -q 'DEPOPULATION_TIME=[1-9]' "$state/bdc.txt" || return 1
	# REPORT SUPPORTED OPERATION CODES lists the three commands and WRITE LONG.
	sg_opcodes "$MEDIA_SD" >"$state/opcodes.txt" 2>&1
	grep -iE 'physical element|remove element|restore element|write long' "$state/opcodes.txt"
	[ "$(grep -ciE 'get physical element status|remove element and truncate|restore elements and rebuild' \
		"$state/opcodes.txt")" = 3 ] && [ "$(grep -ci 'write long' "$state/opcodes.txt")" = 2 ]
}
check media-gpes-4-elements media_gpes

# Read one block with READ(16) through sg_raw: its stderr has the sense data.
media_read_lba() { # media_read_lba DEV LBA OUT
	sg_raw -r 512 -o /dev/null "$1" 88 00 $(printf '%02x %02x %02x %02x %02x %02x %02x %02x' \
		$(($2 >> 56 & 255)) $(($2 >> 48 & 255)) $(($2 >> 40 & 255)) $(($2 >> 32 & 255)) \
		$(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255))) \
		00 00 00 01 00 00 >"$3" 2>&1
}
# The unrecoverable ranges by GET LBA STATUS report type 10h, "LBA BLOCKS" (decimal) per line.
media_bad() {
	local lba n _
	sg_get_lba_status --report-type=16 --maxlen=1024 -b --lba="${1:-0}" "$MEDIA_SD" 2>&1 |
		while read -r lba n _; do
			case $lba in 0x*) echo "$((lba)) $((n))" ;; esac # (headers and notes skipped)
		done
}

media_fail_element() {
	local out=$state/fail.txt
	ctl element media 2 failed || return 1
	# The change is a unit attention first (WARNING - PHYSICAL ELEMENT STATUS CHANGE).
	sg_raw "$MEDIA_SD" 00 00 00 00 00 00 2>&1 | grep -i 'physical element status change' || return 1
	media_drain_ua "$MEDIA_SD"
	sg_get_elem_status --maxlen=1056 --filter=1 "$MEDIA_SD" >"$out" 2>&1
	cat "$out"
	grep -q 'Number of descriptors: 1' "$out" && grep -q 'identifier: 0x0*2 ' "$out" &&
		grep -q 'health: outside' "$out" || return 1
	echo "report type 16:"
	media_bad | head -4
	# Element 2 of 4, stripes of 2048 blocks: 2048-4095, 10240-12287, ...
	[ "$(media_bad | head -2 | tr '\n' ' ')" = "2048 2048 10240 2048 " ] || return 1
	sg_get_lba_status --report-type=16 --lba=2048 "$MEDIA_SD" 2>&1 | tee -a "$out" | head -4
	grep -qiE 'may (contain|return) unrecovered errors' "$out"
}
check media-fail-element-lba-status media_fail_element

media_read_medium_error() {
	local out=$state/read-bad.txt mark
	mark="slate-media-$RANDOM"
	echo "$mark" >/dev/kmsg
	! media_read_lba "$MEDIA_SD" 2048 "$out" || { cat "$out"; echo "read of a failed element's LBA succeeded"; return 1; }
	cat "$out"
	grep -qi 'medium error' "$out" && grep -qi 'unrecovered read error' "$out" || return 1
	grep -qiE 'info fld=0x0*800\b' "$out" || { echo "no LBA 0x800 in the information field"; return 1; }
	# The kernel's own read: an I/O error, logged at the right sector.
	! dd if="$MEDIA_SD" of=/dev/null bs=512 skip=2048 count=1 iflag=direct 2>>"$out" || return 1
	dmesg | sed -n "/$mark/,\$p" | grep -iE 'medium error|I/O error' | tail -4
	dmesg | sed -n "/$mark/,\$p" | grep -iE '(critical medium error|I/O error).*sector 2048\b' >/dev/null
}
check media-read-medium-error media_read_medium_error

media_heal_element() {
	ctl element media 2 ok || return 1
	media_drain_ua "$MEDIA_SD"
	[ -z "$(media_bad)" ] || { media_bad; return 1; }
	media_read_lba "$MEDIA_SD" 2048 "$state/read-ok.txt"
}
check media-heal-element media_heal_element

media_write_long() {
	local out=$state/wl.txt
	media_drain_ua "$MEDIA_SD"
	sg_write_long --wr_uncor --lba=100 "$MEDIA_SD" || return 1
	sg_write_long --16 --wr_uncor --cor_dis --lba=5000 "$MEDIA_SD" || return 1
	media_bad | tee "$out"
	[ "$(tr '\n' ' ' <"$out")" = "100 1 5000 1 " ] || return 1
	! media_read_lba "$MEDIA_SD" 100 "$state/wl-read.txt" || return 1
	grep -i 'unrecovered read error' "$state/wl-read.txt" || return 1
	! dd if="$MEDIA_SD" of=/dev/null bs=512 skip=5000 count=1 iflag=direct 2>/dev/null || return 1
	# A write heals the block.
	dd if=/dev/urandom of="$MEDIA_SD" bs=512 seek=100 count=1 oflag=direct 2>/dev/null || return 1
	media_read_lba "$MEDIA_SD" 100 "$state/wl-read2.txt" || { cat "$state/wl-read2.txt"; return 1; }
	[ "$(media_bad | tr '\n' ' ')" = "5000 1 " ] || { media_bad; return 1; }
	dd if=/dev/zero of="$MEDIA_SD" bs=512 seek=5000 count=1 oflag=direct 2>/dev/null || return 1
	[ -z "$(media_bad)" ]
}
check media-write-long-wr-uncor media_write_long

media_write_long_refused() {
	local out=$state/wl-bad.txt rc=0
	: >"$out"
	# WR_UNCOR=0 (a vendor-specific long block): INVALID FIELD IN CDB (byte 1 bit 6);
	# an LBA past the end: LBA OUT OF RANGE.
	sg_write_long --lba=100 --xfer_len=512 -v "$MEDIA_SD" >>"$out" 2>&1 && { echo "WR_UNCOR=0 accepted"; rc=1; }
	sg_write_long --16 --wr_uncor --lba=$MEDIA_BLOCKS -v "$MEDIA_SD" >>"$out" 2>&1 && { echo "LBA past the end accepted"; rc=1; }
	grep -iE 'invalid field|out of range|byte 1 bit' "$out"
	[ "$rc" = 0 ] && grep -qi 'invalid field in cdb' "$out" && grep -qi 'byte 1 bit 6' "$out" &&
		grep -qi 'lba out of range' "$out" && [ -z "$(media_bad)" ] || { cat "$out"; return 1; }
}
check media-write-long-refused media_write_long_refused

# PBLOCK: the whole physical block holding the LBA (LOGICAL BLOCKS PER PHYSICAL
# BLOCK EXPONENT of READ CAPACITY(16)); refused on a LU with one block per physical block.
media_write_long_pblock() {
	local exp per first out=$state/wl-pblock.txt
	exp=$(sg_readcap -l "$MEDIA_SD" 2>&1 | sed -n 's/.*Logical blocks per physical block exponent=\([0-9]*\).*/\1/p')
	echo "LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT $exp"
	[ -n "$exp" ] || return 1
	if [ "$exp" = 0 ]; then
		! sg_write_long --wr_uncor --pblock --lba=100 -v "$MEDIA_SD" >"$out" 2>&1 || return 1
		grep -i 'byte 1 bit 5' "$out"
		return
	fi
	per=$((1 << exp)) first=$((100 / (1 << exp) * (1 << exp)))
	sg_write_long --wr_uncor --pblock --lba=100 "$MEDIA_SD" || return 1
	media_bad | tee "$out"
	[ "$(tr '\n' ' ' <"$out")" = "$first $per " ] || { echo "want $first $per"; return 1; }
	dd if=/dev/zero of="$MEDIA_SD" bs=512 seek="$first" count="$per" oflag=direct 2>/dev/null || return 1
	[ -z "$(media_bad)" ]
}
check media-write-long-pblock media_write_long_pblock

media_cdb_refused() {
	local out=$state/cdb-bad.txt
	: >"$out"
	# GET PHYSICAL ELEMENT STATUS: FILTER 10b; REPORT TYPE 2.
	! sg_raw -r 1024 "$MEDIA_SD" 9e 17 00 00 00 00 00 00 00 00 00 00 04 00 80 00 >>"$out" 2>&1 || return 1
	! sg_raw -r 1024 "$MEDIA_SD" 9e 17 00 00 00 00 00 00 00 00 00 00 04 00 02 00 >>"$out" 2>&1 || return 1
	# REMOVE ELEMENT AND TRUNCATE: element 9 of 4; a REQUESTED CAPACITY larger than what remains.
	! sg_raw "$MEDIA_SD" 9e 18 00 00 00 00 00 00 00 00 00 00 00 09 00 00 >>"$out" 2>&1 || return 1
	! sg_raw "$MEDIA_SD" 9e 18 00 00 00 00 00 00 ff 00 00 00 00 04 00 00 >>"$out" 2>&1 || return 1
	cat "$out"
	[ "$(grep -ci 'invalid field in cdb' "$out")" = 4 ] && [ "$(media_sectors "$MEDIA_SD")" = $MEDIA_BLOCKS ]
}
check media-malformed-cdbs media_cdb_refused

media_depop() {
	local pat=$state/media-pattern.bin out=$state/depop.txt keep sd_after nv_after nsze mark
	head -c $((MEDIA_BLOCKS * 512)) /dev/urandom >"$pat"
	dd if="$pat" of="$MEDIA_SD" bs=1M oflag=direct 2>/dev/null || return 1
	media_drain_ua "$MEDIA_SD"
	keep=$((MEDIA_BLOCKS - MEDIA_BLOCKS / 4))
	mark="slate-depop-$RANDOM"
	echo "$mark" >/dev/kmsg
	# REMOVE ELEMENT AND TRUNCATE, element 4, REQUESTED CAPACITY 0 (the device chooses).
	sg_raw -v "$MEDIA_SD" 9e 18 00 00 00 00 00 00 00 00 00 00 00 04 00 00 >"$out" 2>&1 ||
		{ cat "$out"; return 1; }
	# The iSCSI host: its next command meets the unit attention, which the kernel
	# logs; a rescan reads the new size.
	dd if="$MEDIA_SD" of=/dev/null bs=512 count=1 iflag=direct 2>&1
	dmesg | sed -n "/$mark/,\$p" | grep -i 'capacity data has changed' ||
		{ echo "no CAPACITY DATA HAS CHANGED in the kernel log"; return 1; }
	media_drain_ua "$MEDIA_SD"
	sg_readcap -16 "$MEDIA_SD" 2>&1 | tee -a "$out" | grep -i 'number of logical blocks'
	grep -qi "Number of logical blocks=$keep\b" "$out" || { cat "$out"; echo "want $keep blocks"; return 1; }
	echo 1 >"/sys/block/${MEDIA_SD#/dev/}/device/rescan"
	wait_for 10 test "$(media_sectors "$MEDIA_SD")" = $keep || return 1
	sd_after=$(media_sectors "$MEDIA_SD")
	# The NVMe host: the namespace event makes the kernel re-read the size by itself.
	wait_for 20 test "$(media_sectors "$MEDIA_NV")" = $keep
	nv_after=$(media_sectors "$MEDIA_NV")
	nsze=$(nvme id-ns "$MEDIA_NV" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nsze"])')
	echo "capacity $MEDIA_BLOCKS -> iSCSI $sd_after, NVMe $nv_after blocks, NSZE $nsze"
	[ "$nv_after" = $keep ] && [ "$nsze" = $keep ] || return 1
	media_elem 4 | tee -a "$out"
	media_elem 4 | grep -q 'depopulation completed' && media_elem 4 | grep -q 'RALWD' || return 1
	# The data on the remaining capacity, from both hosts.
	cmp -n $((keep * 512)) <(dd if="$MEDIA_SD" bs=1M iflag=direct 2>/dev/null) "$pat" &&
		cmp -n $((keep * 512)) <(dd if="$MEDIA_NV" bs=1M iflag=direct 2>/dev/null) "$pat" ||
		{ echo "data on the remaining capacity changed"; return 1; }
}
check media-depop-remove-truncate media_depop

media_restore() {
	local out=$state/restore.txt
	media_drain_ua "$MEDIA_SD"
	sg_raw -v "$MEDIA_SD" 9e 19 00 00 00 00 00 00 00 00 00 00 00 00 00 00 >"$out" 2>&1 || { cat "$out"; return 1; }
	dd if="$MEDIA_SD" of=/dev/null bs=512 count=1 iflag=direct 2>&1
	media_drain_ua "$MEDIA_SD"
	sg_readcap -16 "$MEDIA_SD" 2>&1 | grep -i 'number of logical blocks' | tee -a "$out"
	grep -qi "Number of logical blocks=$MEDIA_BLOCKS\b" "$out" || return 1
	echo 1 >"/sys/block/${MEDIA_SD#/dev/}/device/rescan"
	wait_for 10 test "$(media_sectors "$MEDIA_SD")" = $MEDIA_BLOCKS || return 1
	wait_for 20 test "$(media_sectors "$MEDIA_NV")" = $MEDIA_BLOCKS || return 1
	echo "restored: iSCSI $(media_sectors "$MEDIA_SD"), NVMe $(media_sectors "$MEDIA_NV") blocks"
	media_elem 4 | grep -q 'health: within'
}
check media-restore-rebuild media_restore

media_teardown() {
	ctl iscsi_lun_unmap target="$XIQN" lun=$MEDIA_LUN || return 1
	ctl nvmf_ns_detach nqn="$XNQN" nsid=$MEDIA_NSID || return 1
	media_drain_ua "$SD"
}
check media-teardown media_teardown
