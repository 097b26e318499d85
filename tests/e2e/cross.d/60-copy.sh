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
#   - EXTENDED COPY(LID4) with 02h and 0Ah segments (sg_raw), IMMED, its
#     results with ddptctl (RECEIVE COPY STATUS(LID4), RRTI polling, COPY
#     OPERATION ABORT);
#   - ddptctl's own POPULATE TOKEN refused (its list is malformed);
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

# EXTENDED COPY(LID4) by hand with sg_raw (no Debian tool sends LID4: sg_xcopy
# and ddpt --xcopy use LID1); its results through ddptctl, which does send
# RECEIVE COPY STATUS(LID4) (--prefer-rcs), RECEIVE ROD TOKEN INFORMATION
# (--poll) and COPY OPERATION ABORT (--abort).  lid4_list LIST_ID IMMED
# SRC_VPD83 DST_VPD83 SEG... writes the parameter list: two identification
# CSCDs from the LUs' VPD 83h NAA designators, then segments
# b2b:NLB:SRC_LBA:DST_LBA (02h) or off:BYTES:SRC_LBA:DST_LBA:SRC_OFF:DST_OFF (0Ah).
lid4_list() {
	python3 - "$@" <<'PY'
import struct, sys
lid, immed, src, dst, segs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def cscd(path):
    v = open(path, "rb").read()
    naa = v[4:8 + v[7]]  # the first designator: NAA
    d = bytearray(32)
    d[0] = 0xE4
    d[4:4 + len(naa)] = naa
    d[4] &= 0x0F
    d[29:32] = (512).to_bytes(3, "big")
    return bytes(d)
cs = cscd(src) + cscd(dst)
sd = b""
for a in segs:
    f = a.split(":")
    if f[0] == "b2b":
        sd += struct.pack(">BBHHHxxHQQ", 0x02, 0, 0x18, 0, 1, int(f[1]), int(f[2]), int(f[3]))
    else:
        sd += struct.pack(">BBHHHIQQHH", 0x0A, 0, 0x1C, 0, 1, *(int(x) for x in f[1:]))
h = bytearray(48)
h[0] = 0x01                            # PARAMETER LIST FORMAT
h[2:4] = b"\x00\x20"                   # HEADER CSCD DESCRIPTOR LIST LENGTH
h[15] = immed                          # IMMED
h[16] = 0xFF                           # HEADER CSCD DESCRIPTOR TYPE CODE
h[20:24] = lid.to_bytes(4, "big")      # LIST IDENTIFIER
h[42:44] = len(cs).to_bytes(2, "big")
h[44:46] = len(sd).to_bytes(2, "big")
sys.stdout.buffer.write(bytes(h) + cs + sd)
PY
}
lid4_xcopy() { # SG LIST_ID IMMED SEG...
	local sg=$1 id=$2 immed=$3 n
	shift 3
	sg_vpd -p 0x83 -r "$SGSRC" >"$state/src.vpd" && sg_vpd -p 0x83 -r "$SGDST" >"$state/dst.vpd" || return 1
	lid4_list "$id" "$immed" "$state/src.vpd" "$state/dst.vpd" "$@" >"$state/lid4.bin" || return 1
	n=$(stat -c %s "$state/lid4.bin")
	# shellcheck disable=SC2046
	sg_raw -s "$n" -i "$state/lid4.bin" "$sg" 83 01 00 00 00 00 00 00 00 00 \
		$(printf '%02x %02x %02x %02x' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255))) 00 00 2>&1
}

ts() { echo "[$(date +%T.%N | cut -c1-12)] $*"; } # a timestamped log line

xcopy_lid4_0a() {
	local out
	ts "LID4 02h + 0Ah"
	# The source holds cpy.bin again, the destination zeroes (above).  Sent to the
	# source's target: 2048 blocks with a 02h segment, then 1 MiB with a 0Ah segment
	# whose source byte offset is one whole block (so LBA 4096 + 1).
	lid4_xcopy "$SGSRC" 1217 0 b2b:2048:0:0 off:1048576:4096:10000:512:0 || return 1
	ts "copied"
	cmp <(dd if="$SDDST" bs=1M count=1 iflag=direct status=none) <(head -c $((2048 * 512)) "$state/cpy.bin") ||
		{ echo "02h segment differs"; return 1; }
	cmp <(dd if="$SDDST" bs=1M skip=$((10000 * 512)) count=$((2048 * 512)) \
		iflag=direct,skip_bytes,count_bytes status=none) \
		<(tail -c +$((4097 * 512 + 1)) "$state/cpy.bin" | head -c $((2048 * 512))) ||
		{ echo "0Ah segment differs"; return 1; }
	ts "compared"
	# RECEIVE COPY STATUS(LID4), as ddptctl sends it.
	out=$(ddptctl --receive --prefer-rcs --list_id=1217 -v "$SGSRC" 2>&1)
	echo "$out"
	echo "$out" | grep -qi 'XCOPY(LID4).*completed without errors' || return 1
	ts "status read"
	# A byte count that is not whole blocks: COPY ABORTED, INVALID FIELD IN PARAMETER LIST.
	out=$(lid4_xcopy "$SGSRC" 1218 0 off:1000:0:20000:0:0)
	echo "$out"
	echo "$out" | grep -qi 'copy aborted' && echo "$out" | grep -qi 'invalid field in parameter list'
}
check xcopy-lid4-02h-and-0ah xcopy_lid4_0a

xcopy_lid4_immed() {
	local out
	# IMMED: status at once, the copy behind it; ddptctl --poll sends RECEIVE ROD
	# TOKEN INFORMATION until the operation is over.
	ts "LID4 IMMED"
	dd if=/dev/zero of="$SDDST" bs=1M count=8 oflag=direct status=none || return 1
	lid4_xcopy "$SGSRC" 1219 1 b2b:8192:0:0 b2b:8192:8192:8192 || return 1
	out=$(ddptctl --poll --list_id=1219 -v "$SGSRC" 2>&1)
	echo "$out" | tail -3
	ts "polled to the end"
	same_mib "$SDSRC" "$SDDST" 8 || { echo "data differs after LID4 IMMED"; return 1; }
	# COPY OPERATION ABORT of an operation that is not running: ILLEGAL REQUEST.
	out=$(ddptctl --abort --list_id=1219 -v "$SGSRC" 2>&1)
	echo "$out"
	echo "$out" | grep -qi 'illegal request'
}
check xcopy-lid4-immed-poll-abort xcopy_lid4_immed

# ODX with Debian's ddpt/ddptctl 0.97: its POPULATE TOKEN list puts the block
# device range descriptor at byte 15 instead of 16 (ddpt_xcopy.c do_pop_tok:
# n = 15, then BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH written over byte
# 15), so the LBA is read shifted by a byte and NUMBER OF LOGICAL BLOCKS as
# 256 times too large; WRITE USING TOKEN the same at byte 535 (do_wut).  A copy manager must refuse it, not guess: ILLEGAL
# REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE, and the daemon carries on.
ddptctl_pt_refused() {
	local out
	out=$(ddptctl --pt=0,8192 -vv "$SGSRC" 2>&1)
	echo "$out" | grep -iE 'parameter list|populate|sense|range' | head -8
	echo "$out" | grep -qi 'logical block address out of range' && sg_turs "$SGSRC" || return 1
	ts "POPULATE TOKEN refused"
	# WRITE USING TOKEN likewise (descriptor at 535): a good token made with sg_raw,
	# handed to ddptctl --wut, is refused and the destination keeps its data.
	odx_pt "$SGSRC" 270 0 8192 >/dev/null || return 1
	odx_token "$SGSRC" 270 "$state/dd.rt" >/dev/null || return 1
	ts "token made"
	dd if=/dev/zero of="$SDDST" bs=1M count=4 oflag=direct status=none || return 1
	out=$(timeout 120 ddptctl --wut=0,8192 --rtf="$state/dd.rt" -vv "$SGDST" 2>&1)
	ts "ddptctl --wut returned"
	echo "$out" | grep -iE 'write using token|sense|range' | head -6
	echo "$out" | grep -qi 'logical block address out of range' || return 1
	cmp <(dd if="$SDDST" bs=1M count=4 iflag=direct status=none) <(head -c $((4 << 20)) /dev/zero)
}
check ddptctl-odx-misplaced-ranges-refused ddptctl_pt_refused

copy_cleanup() {
	iscsi_logout "$XIQN2" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
	ctl iscsi_lun_unmap target="$XIQN" lun=2 || return 1
	ctl iscsi_lun_unmap target="$XIQN2" lun=0 || return 1
	ctl iscsi_target_delete name="$XIQN2" || return 1
	sg_turs "$SD" >/dev/null 2>&1 # REPORTED LUNS DATA HAS CHANGED
	ctl namespace_delete name=csrc && ctl namespace_delete name=cdst
}
check copy-cleanup copy_cleanup
