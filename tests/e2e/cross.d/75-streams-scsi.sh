# tests/e2e/cross.d/75-streams-scsi.sh — sourced by tests/e2e/cross-linux.sh.
# SCSI streams and GROUP NUMBER (issue 9, SCSI side) with the Linux 6.12
# kernel and sg3_utils, on "shared" (LUN 0, $SD):
#   - `sg_vpd -p ble`: MAXIMUM NUMBER OF STREAMS and RSCS; `sg_vpd -p ei`:
#     GROUP_SUP; `sg_modes` of the IO advice hints grouping page 0Ah/05h;
#   - `sg_stream_ctl` open / status / close, and its errors (closing a
#     stream twice, a permanent stream);
#   - `sg_write_x --stream` (16 and 32) writes to an open stream, dd reads
#     the data back; a write to a closed stream gets STREAM NOT OPEN;
#   - `sg_write_x --grpnum` is counted in the group's statistics page
#     (`sg_logs -p 0x19,N`);
#   - the kernel itself: sd counted the permanent streams, and a write from
#     a block device whose lifetime hint was set with fcntl(F_SET_RW_HINT)
#     (tests/e2e/rw_hint) arrives with GROUP NUMBER = the hint, seen in the
#     target's per-group counters.
# LBAs 131072.. (64 MiB in) are unused by the other parts.

ss_base=131072
ss_read() { dd if="$SD" iflag=direct,skip_bytes,count_bytes skip=$(($1 * 512)) count=$(($2 * 512)) 2>/dev/null; }
# Group N's "number of write commands" (LOG SENSE 19h/N, raw: page header 4 + parameter
# header 4 + read commands 8 = offset 16), from sg_logs.
# sg3_utils sends a command once; a unit attention pending on the nexus (a session the
# initiator re-established under load: POWER ON) fails it once.  Retry like the kernel does.
ss_retry() {
	local i
	for i in 1 2 3; do
		"$@" && return 0
		sleep 1
	done
	return 1
}
ss_logs_raw() { sg_logs -p "0x19,$1" --raw "$SD" >"$state/ss-log19.bin" 2>/dev/null && [ -s "$state/ss-log19.bin" ]; }
ss_group_writes() {
	ss_retry ss_logs_raw "$1" || return 1
	od -An -tu1 -j16 -N8 "$state/ss-log19.bin" | awk '{v=0; for (i=1;i<=NF;i++) v=v*256+$i; print v}'
}

ss_vpd() {
	sg_vpd -p ble "$SD" | tee "$state/ss-ble.txt"
	grep -Eq 'Maximum number of streams: *1[0-9]' "$state/ss-ble.txt" || return 1
	# RSCS (byte 5 bit 0; sg_vpd 1.46 does not decode it): from the raw page
	[ $(($(sg_vpd -p ble --raw "$SD" | od -An -tu1 -j5 -N1) & 1)) = 1 ] || return 1
	echo "RSCS=1"
	sg_vpd -p ei "$SD" | tee "$state/ss-ei.txt" | grep -i group_sup
	grep -Eq 'GROUP_SUP=1' "$state/ss-ei.txt"
}
check streams-vpd-ble-ei ss_vpd

ss_modes() {
	sg_modes -p 0x0a,0x05 "$SD" | tee "$state/ss-modes.txt" | head -20
	# the page header: SPF + 0Ah, subpage 05h, page length 040Ch
	grep -Eiq '4a 05 04 0c' "$state/ss-modes.txt" || return 1
	# descriptor 0..5 carry ST_ENBLE (byte 0 = 04h/05h): Linux counts them
	dmesg | grep -i 'permanent stream count' | tail -1 | tee "$state/ss-dmesg.txt"
	grep -q 'permanent stream count = 6' "$state/ss-dmesg.txt"
}
check streams-sg_modes-grouping-page ss_modes

ss_open() { sg_stream_ctl --open --brief "$SD"; }
ss_status_count() { sg_stream_ctl --get "$SD" | awk -F': ' '/Number of open streams/ {print $2+0}'; }

ss_ctl() {
	local n0 id n1
	n0=$(ss_status_count)
	echo "open streams before: $n0"
	[ "$n0" = 5 ] || return 1 # the permanent ones
	id=$(ss_open) || return 1
	echo "assigned stream id: $id"
	[ "$id" -gt 5 ] || return 1
	sg_stream_ctl --get "$SD" | tee "$state/ss-get.txt"
	n1=$(ss_status_count)
	[ "$n1" = 6 ] || return 1
	# sg3_utils 1.46's sg_stream_ctl (1.09) takes PARAMETER DATA LENGTH as counting the 8-byte
	# header too and lists one descriptor fewer; SBC-4, Linux sd and scsi_debug count only the
	# descriptors.  So the new stream's descriptor is read with sg_raw, from STARTING STREAM
	# IDENTIFIER $id: one descriptor, not permanent, STREAM IDENTIFIER $id.
	ss_retry sg_raw -r 64 -o "$state/ss-gss.bin" "$SD" 9e 16 00 00 $(printf '%02x %02x' $((id >> 8)) $((id & 255))) \
		00 00 00 00 00 00 00 40 00 00 || return 1
	od -An -tx1 "$state/ss-gss.bin"
	[ "$(od -An -tu1 -j0 -N16 "$state/ss-gss.bin" | tr -s ' ')" = " 0 0 0 8 0 0 0 6 0 0 0 $id 0 0 0 0" ] || return 1
	sg_stream_ctl -v --close --id="$id" "$SD" || return 1
	n1=$(ss_status_count)
	echo "open streams after close: $n1"
	[ "$n1" = 5 ] || return 1
	# closing it again, and closing a permanent stream: ILLEGAL REQUEST
	! sg_stream_ctl -v --close --id="$id" "$SD" >"$state/ss-close2.txt" 2>&1 || return 1
	cat "$state/ss-close2.txt"
	grep -i 'invalid field in cdb' "$state/ss-close2.txt" || return 1
	! sg_stream_ctl -v --close --id=1 "$SD" >"$state/ss-close1.txt" 2>&1 || return 1
	cat "$state/ss-close1.txt"
	grep -i 'invalid field in cdb' "$state/ss-close1.txt"
}
check streams-sg_stream_ctl-open-status-close ss_ctl

# sg_write_x --stream=ID (16 or 32) of N blocks at LBA to a freshly opened stream; read back.
ss_write_stream() {
	local cdb=$1 lba=$2 n=$3 f=$state/ss-data-$1 id rc=0
	head -c $((n * 512)) /dev/urandom >"$f"
	id=$(ss_open) || return 1
	sg_write_x --stream="$id" ${cdb:+"$cdb"} --lba="$lba" --num="$n" --in="$f" "$SD" || rc=1
	[ $rc = 0 ] && cmp <(ss_read "$lba" "$n") "$f" || rc=1
	sg_stream_ctl --close --id="$id" "$SD" || rc=1
	# now closed: STREAM NOT OPEN (2Ch/0Fh)
	! sg_write_x -v --stream="$id" ${cdb:+"$cdb"} --lba="$lba" --num="$n" --in="$f" "$SD" \
		>"$state/ss-closed-$1.txt" 2>&1 || return 1
	grep -Ei 'stream not open|asc=0x2c.*ascq=0xf|2c/0f|0x2c, *0xf' "$state/ss-closed-$1.txt" || {
		cat "$state/ss-closed-$1.txt"
		return 1
	}
	return $rc
}
check streams-sg_write_x-stream-16 ss_write_stream "" $((ss_base + 8)) 16
check streams-sg_write_x-stream-32 ss_write_stream --32 $((ss_base + 64)) 8

ss_grpnum() {
	local before after f=$state/ss-grp
	head -c 4096 /dev/urandom >"$f"
	before=$(ss_group_writes 3)
	sg_write_x --grpnum=3 --lba=$((ss_base + 200)) --num=8 --in="$f" "$SD" || return 1
	sg_write_x --grpnum=3 --lba=$((ss_base + 208)) --num=8 --in="$f" "$SD" || return 1
	after=$(ss_group_writes 3)
	sg_logs -p 0x19,3 "$SD"
	echo "group 3 write commands: $before -> $after"
	[ "$after" = $((before + 2)) ]
}
check streams-sg_write_x-grpnum-group-stats ss_grpnum

# Bytes the core counted against placement (KIND, KEY) (flash_stats RPC; 0 when none).
ss_place_bytes() {
	ctl --json flash_stats name=shared | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(p["bytes_written"] for p in d["placements"] if p["kind"] == sys.argv[1] and p["key"] == int(sys.argv[2])))' "$1" "$2"
}

# The Linux sd driver sets GROUP NUMBER from the file's write-lifetime hint: for each hint
# (2 short .. 5 extreme) one O_DIRECT write; the group == hint counter moves, the others not,
# and the core counts the 64 KiB against permanent stream h's placement.
ss_kernel_hint() {
	local h g b a other0 other1 pb pa
	for h in 2 3 4 5; do
		other0=$(ss_group_writes $((h == 5 ? 2 : h + 1)))
		b=$(ss_group_writes $h)
		pb=$(ss_place_bytes scsi_group $h)
		"$SLATE_BUILD/tests/rw_hint" "$SD" $(((ss_base + 1024 + h * 128) * 512)) 65536 "$h" $((0x40 + h)) ||
			return 1
		a=$(ss_group_writes $h)
		other1=$(ss_group_writes $((h == 5 ? 2 : h + 1)))
		pa=$(ss_place_bytes scsi_group $h)
		echo "hint $h: group $h write commands $b -> $a; group $((h == 5 ? 2 : h + 1)) $other0 -> $other1;" \
			"core placement scsi_group/$h bytes $pb -> $pa"
		[ "$a" -gt "$b" ] && [ "$other0" = "$other1" ] && [ "$((pa - pb))" = 65536 ] || return 1
		cmp <(ss_read $((ss_base + 1024 + h * 128)) 128) <(head -c 65536 /dev/zero | tr '\0' "\\$(printf '%03o' $((0x40 + h)))") ||
			return 1
	done
	sg_logs -p 0x19,2 "$SD"
	# The hint stays on the device node's inode: back to "not set" for the parts after this one.
	"$SLATE_BUILD/tests/rw_hint" "$SD" $(((ss_base + 2048) * 512)) 4096 0 0
}
check streams-kernel-rw-hint-group-number ss_kernel_hint
