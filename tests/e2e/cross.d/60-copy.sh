# tests/e2e/cross.d/60-copy.sh — sourced by tests/e2e/cross-linux.sh.
# SCSI copy offload with the Linux iSCSI host and real tools, between two
# scratch namespaces on two different target ports (the copy manager
# reaches both: the host is logged in to both), data checked with cmp:
#   - sg_xcopy (EXTENDED COPY(LID1)) from LUN 2 of $XIQN to LUN 0 of
#     ${XIQN}b, list ID held, then sg_copy_results --status / --params;
#   - ODX the other way round (POPULATE TOKEN, RECEIVE ROD TOKEN
#     INFORMATION, WRITE USING TOKEN with sg_raw through the kernel's SG_IO:
#     Debian's ddpt 0.97 misplaces its range descriptors by one byte), a
#     token refused once DEL_TKN deleted it, one token over two source
#     ranges written from an offset into it, the block device zero token;
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
	timeout 300 sg_xcopy --on_src if="$SGSRC" of="$SGDST" bs=512 bpt=32768 count=$CPY_BLOCKS list_id=7 \
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

# ODX by hand with sg_raw: ddpt/ddptctl 0.97 put their block device range
# descriptors one byte early (at offset 15 of POPULATE TOKEN's list, 535 of
# WRITE USING TOKEN's), so no target can honour them.  odx_list KIND ...
# writes a parameter list: pt LBA NUM [LBA NUM...] | wut TOKENFILE OFFSET LBA NUM.
odx_list() {
	python3 - "$@" <<'PY'
import struct, sys
kind, args = sys.argv[1], sys.argv[2:]
if kind == "pt":
    r = [int(a) for a in args]
    d = b"".join(struct.pack(">QI4x", r[i], r[i + 1]) for i in range(0, len(r), 2))
    p = struct.pack(">HBx4sI2xH", 14 + len(d), 0, struct.pack(">I", 0), 0, len(d)) + d
else:
    tok = open(args[0], "rb").read(512)
    d = struct.pack(">QI4x", int(args[2]), int(args[3]))
    p = struct.pack(">HBx4xQ", 534 + len(d), 0x02, int(args[1])) + tok + bytes(6) + \
        struct.pack(">H", len(d)) + d
sys.stdout.buffer.write(p)
PY
}
# odx_cdb SA LIST_ID LEN -> the 16 CDB bytes (hex) of POPULATE TOKEN / WRITE USING TOKEN
odx_cdb() { printf '83 %02x 00 00 00 00 %02x %02x %02x %02x %02x %02x %02x %02x 00 00' "$1" \
	$(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255)) \
	$(($3 >> 24 & 255)) $(($3 >> 16 & 255)) $(($3 >> 8 & 255)) $(($3 & 255)); }
# odx_token SG LIST_ID FILE: RECEIVE ROD TOKEN INFORMATION, the 512-byte token into FILE
odx_token() {
	# shellcheck disable=SC2046
	sg_raw -r 1024 -o "$state/rrti.bin" "$1" 84 07 $(printf '%02x %02x %02x %02x' \
		$(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255))) \
		00 00 00 00 00 00 04 00 00 00 >/dev/null 2>&1 || return 1
	od -An -tx1 -j4 -N2 "$state/rrti.bin" # RESPONSE TO SERVICE ACTION, COPY OPERATION STATUS
	dd if="$state/rrti.bin" of="$3" bs=1 skip=38 count=512 status=none
	[ "$(od -An -tx1 -j5 -N1 "$state/rrti.bin" | tr -d ' ')" = 01 ]
}
odx_pt() { # SG LIST_ID LBA NUM...
	local sg=$1 id=$2
	shift 2
	odx_list pt "$@" >"$state/pt.bin"
	# shellcheck disable=SC2046
	sg_raw -s "$(stat -c %s "$state/pt.bin")" -i "$state/pt.bin" "$sg" \
		$(odx_cdb 0x10 "$id" "$(stat -c %s "$state/pt.bin")") 2>&1
}
odx_wut() { # SG LIST_ID TOKENFILE OFFSET LBA NUM
	odx_list wut "$3" "$4" "$5" "$6" >"$state/wut.bin"
	# shellcheck disable=SC2046
	sg_raw -s "$(stat -c %s "$state/wut.bin")" -i "$state/wut.bin" "$1" \
		$(odx_cdb 0x11 "$2" "$(stat -c %s "$state/wut.bin")") 2>&1
}

odx_back_and_zero() {
	local t0 t1
	# Overwrite the source, then copy the destination's (old) data back over
	# it with one token: POPULATE TOKEN + RECEIVE ROD TOKEN INFORMATION on
	# the other target's LU, WRITE USING TOKEN (DEL_TKN) on this one.
	dd if=/dev/zero of="$SDSRC" bs=1M count=$CPY_MIB oflag=direct status=none || return 1
	t0=$(date +%s%N)
	odx_pt "$SGDST" 257 0 $CPY_BLOCKS || return 1
	odx_token "$SGDST" 257 "$state/all.rt" || return 1
	odx_wut "$SGSRC" 258 "$state/all.rt" 0 0 $CPY_BLOCKS || return 1
	t1=$(date +%s%N)
	echo "ODX (PT + RRTI + WUT): ${CPY_MIB} MiB in $(((t1 - t0) / 1000000)) ms"
	cmp <(dd if="$SDSRC" bs=1M count=$CPY_MIB iflag=direct status=none) "$state/cpy.bin" ||
		{ echo "data differs after PT + WUT"; return 1; }
	# The token was deleted with its last use (DEL_TKN): INVALID TOKEN OPERATION.
	if odx_wut "$SGSRC" 259 "$state/all.rt" 0 0 8 >"$state/wut2.txt"; then
		echo "a deleted token was accepted"
		return 1
	fi
	cat "$state/wut2.txt"
	grep -qi 'token' "$state/wut2.txt" || return 1
	# One token over two source ranges (gather), written from block 1000 of
	# its data into the other target's LU, read back.
	odx_pt "$SGSRC" 260 0 2048 8192 2048 || return 1
	odx_token "$SGSRC" 260 "$state/two.rt" || return 1
	odx_wut "$SGDST" 261 "$state/two.rt" 1000 20000 2048 || return 1
	cmp <(dd if="$SDDST" bs=512 skip=20000 count=2048 iflag=direct status=none) \
		<(cat <(tail -c +$((1000 * 512 + 1)) "$state/cpy.bin" | head -c $((1048 * 512))) \
			<(tail -c +$((8192 * 512 + 1)) "$state/cpy.bin" | head -c $((1000 * 512)))) ||
		{ echo "gather/scatter token copy differs"; return 1; }
	# The block device zero ROD token: zeroes on the destination.
	python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack(">IxxH", 0xffff0001, 0x1f8) + bytes(504))' \
		>"$state/zero.rt"
	odx_wut "$SGDST" 262 "$state/zero.rt" 0 0 $CPY_BLOCKS || return 1
	cmp <(dd if="$SDDST" bs=1M count=$CPY_MIB iflag=direct status=none) \
		<(head -c $((CPY_MIB << 20)) /dev/zero) || { echo "not zeroed"; return 1; }
}
check odx-sg_raw-and-zero-token odx_back_and_zero

copy_cleanup() {
	iscsi_logout "$XIQN2" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
	ctl iscsi_lun_unmap target="$XIQN" lun=2 || return 1
	ctl iscsi_lun_unmap target="$XIQN2" lun=0 || return 1
	ctl iscsi_target_delete name="$XIQN2" || return 1
	sg_turs "$SD" >/dev/null 2>&1 # REPORTED LUNS DATA HAS CHANGED
	ctl namespace_delete name=csrc && ctl namespace_delete name=cdst
}
check copy-cleanup copy_cleanup
