# tests/e2e/cross.d/60-copy.sh — sourced by tests/e2e/cross-linux.sh.
# SCSI copy offload with the Linux iSCSI host and real tools, between two
# scratch namespaces on two different target ports (the copy manager
# reaches both: the host is logged in to both), data checked with cmp:
#   - sg_xcopy (EXTENDED COPY(LID1)) from LUN 2 of $XIQN to LUN 0 of
#     ${XIQN}b, list ID held, then sg_copy_results --status / --params;
#   - ddpt --odx (POPULATE TOKEN, RECEIVE ROD TOKEN INFORMATION, WRITE USING
#     TOKEN) the other way round, and ddpt rtype=zero (the block device zero
#     ROD token);
#   - sg_vpd -p tpc shows the Third-party Copy page, sg_inq the 3PC bit.

CPY_MIB=32
CPY_BLOCKS=$((CPY_MIB * 2048))
XIQN2=${XIQN}b

# lu_dev_of IQN LUN [block] -> the /dev/sgN (/dev/sdX with "block") of that LU of an iSCSI session
lu_dev_of() {
	local iqn=$1 lun=$2 kind=${3:-scsi_generic} s d
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat "$s/targetname" 2>/dev/null)" = "$iqn" ] || continue
		for d in "$s"/device/target*/*:*:*:"$lun"/"$kind"/*; do
			[ -e "$d" ] && { echo "/dev/$(basename "$d")"; return 0; }
		done
	done
	return 1
}

copy_setup() {
	ctl namespace_create name=csrc backend=mem size=${CPY_MIB}M || return 1
	ctl namespace_create name=cdst backend=file path="$state/cdst.img" size=${CPY_MIB}M || return 1
	ctl iscsi_lun_map target="$XIQN" lun=2 namespace=csrc || return 1
	ctl iscsi_target_create name="$XIQN2" || return 1
	ctl iscsi_lun_map target="$XIQN2" lun=0 namespace=cdst || return 1
	iscsiadm -m session --rescan >/dev/null 2>&1
	iscsi_login "$XIQN2" 127.0.0.1 "$ISCSI_PORT" >/dev/null || return 1
	wait_for 10 lu_dev_of "$XIQN" 2 || { echo "LUN 2 did not appear"; return 1; }
	wait_for 10 lu_dev_of "$XIQN2" 0 || { echo "${XIQN2} LUN 0 did not appear"; return 1; }
	wait_for 10 lu_dev_of "$XIQN" 2 block || return 1
	wait_for 10 lu_dev_of "$XIQN2" 0 block || return 1
	SGSRC=$(lu_dev_of "$XIQN" 2) SGDST=$(lu_dev_of "$XIQN2" 0)
	SDSRC=$(lu_dev_of "$XIQN" 2 block) SDDST=$(lu_dev_of "$XIQN2" 0 block)
	echo "source $SGSRC ($SDSRC), destination $SGDST ($SDDST)"
	sg_turs "$SGSRC" >/dev/null 2>&1; sg_turs "$SGDST" >/dev/null 2>&1 # unit attentions
	head -c $((CPY_MIB << 20)) /dev/urandom >"$state/cpy.bin"
	dd if="$state/cpy.bin" of="$SDSRC" bs=1M oflag=direct status=none || return 1
	sg_inq "$SGSRC" | grep -E '3PC=1' || { sg_inq "$SGSRC"; return 1; }
	sg_vpd -p tpc "$SGSRC" >"$state/tpc.txt" || return 1
	grep -E 'Supported [Cc]ommands|Block Device ROD Token Limits' "$state/tpc.txt"
	grep -q 'Block Device ROD Token Limits' "$state/tpc.txt" &&
		grep -qi 'Populate token' "$state/tpc.txt" &&
		grep -qi 'Extended copy(LID1)' "$state/tpc.txt"
}
check copy-setup-two-targets copy_setup

# cmp the first N MiB of two block devices (no page cache)
same_mib() {
	cmp <(dd if="$1" bs=1M count="$3" iflag=direct status=none) \
		<(dd if="$2" bs=1M count="$3" iflag=direct status=none)
}

xcopy_across_targets() {
	local out t0 t1
	t0=$(date +%s%N)
	# 16 MiB segments, list ID 7 held for RECEIVE COPY RESULTS.
	sg_xcopy --on_src if="$SGSRC" of="$SGDST" bs=512 bpt=32768 count=$CPY_BLOCKS list_id=7 \
		id_usage=hold 2>&1 || return 1
	t1=$(date +%s%N)
	echo "sg_xcopy: ${CPY_MIB} MiB in $(((t1 - t0) / 1000000)) ms"
	same_mib "$SDSRC" "$SDDST" "$CPY_MIB" || { echo "data differs after sg_xcopy"; return 1; }
	out=$(sg_copy_results --status --list_id=7 "$SGSRC" 2>&1)
	echo "$out"
	echo "$out" | grep -qi 'Operation completed without errors' || return 1
	out=$(sg_copy_results --params "$SGSRC" 2>&1)
	echo "$out" | head -8
	echo "$out" | grep -Eiq 'segment descriptor count: *16'
}
check sg_xcopy-across-targets xcopy_across_targets

odx_back_and_zero() {
	local t0 t1
	# Overwrite the source, then ODX the destination's (old) data back over it.
	dd if=/dev/zero of="$SDSRC" bs=1M count=$CPY_MIB oflag=direct status=none || return 1
	t0=$(date +%s%N)
	ddpt --odx if="$SGDST" of="$SGSRC" bs=512 count=$CPY_BLOCKS 2>&1 || return 1
	t1=$(date +%s%N)
	echo "ddpt --odx: ${CPY_MIB} MiB in $(((t1 - t0) / 1000000)) ms"
	cmp <(dd if="$SDSRC" bs=1M count=$CPY_MIB iflag=direct status=none) "$state/cpy.bin" ||
		{ echo "data differs after ddpt --odx"; return 1; }
	# The block device zero ROD token: zeroes on the destination.
	ddpt if=/dev/null rtype=zero of="$SGDST" bs=512 count=$CPY_BLOCKS 2>&1 || return 1
	cmp <(dd if="$SDDST" bs=1M count=$CPY_MIB iflag=direct status=none) \
		<(head -c $((CPY_MIB << 20)) /dev/zero) || { echo "not zeroed"; return 1; }
}
check ddpt-odx-and-zero-token odx_back_and_zero

copy_cleanup() {
	iscsi_logout "$XIQN2" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
	ctl iscsi_lun_unmap target="$XIQN" lun=2 || return 1
	ctl iscsi_lun_unmap target="$XIQN2" lun=0 || return 1
	ctl iscsi_target_delete name="$XIQN2" || return 1
	sd_drain_ua >/dev/null
	ctl namespace_delete name=csrc && ctl namespace_delete name=cdst
}
check copy-cleanup copy_cleanup
