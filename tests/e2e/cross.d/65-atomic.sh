# tests/e2e/cross.d/65-atomic.sh — sourced by tests/e2e/cross-linux.sh.
# Atomic and scattered writes over iSCSI (issue 8, SCSI side), with the
# Linux 6.12 kernel and sg3_utils:
#   - `sg_vpd -p bl` shows the Block Limits atomic fields, `sg_vpd -p ble`
#     the WRITE SCATTERED limits, and vendor page C0h is listed;
#   - the kernel took the limits: /sys/block/sdX/queue/atomic_write_*;
#   - `sg_write_x --atomic` (16- and 32-byte CDBs) and `sg_write_x
#     --scattered` (16 and 32) write, and dd reads the data back where the
#     command put it (cmp), the blocks around untouched;
#   - an atomic write longer than the maximum is refused with INVALID FIELD
#     IN CDB;
#   - tests/e2e/atomic_rw (pwritev2 RWF_ATOMIC through O_DIRECT) writes at
#     the kernel's atomic unit max, and reads back; one byte-range the
#     kernel must refuse (above unit max) is refused.
# Works on "shared" (LUN 0, $SD): LBAs 65536.. (32 MiB in) are unused by
# the earlier parts' checks.

aw_base=65536 # 512-byte LBAs
aw_sysfs() { cat "/sys/block/${SD#/dev/}/queue/$1" 2>/dev/null; }
aw_pattern() { head -c "$2" /dev/urandom >"$1"; }
aw_read() { dd if="$SD" iflag=direct,skip_bytes,count_bytes skip=$(($1 * 512)) count=$(($2 * 512)) 2>/dev/null; }
aw_zero() { dd if=/dev/zero of="$SD" oflag=direct,seek_bytes bs=512 seek=$(($1 * 512)) count="$2" 2>/dev/null; }

# Atomic writes are off by default (atomic_write_max 0): turn them on for
# "shared" at run time (INQUIRY DATA HAS CHANGED) and have sd re-read its
# VPD pages, as an administrator would; they are turned off again at the end.
aw_enable() {
	ctl namespace_set name=shared atomic_write_max=128K >/dev/null || return 1
	echo 1 >"/sys/block/${SD#/dev/}/device/rescan"
	sleep 1
	[ "$(aw_sysfs atomic_write_unit_max_bytes)" = 131072 ]
}
check atomic-enable-at-runtime aw_enable

aw_vpd() {
	local max
	sg_vpd -p bl "$SD" >"$state/aw-bl.txt" 2>&1
	grep -i atomic "$state/aw-bl.txt"
	max=$(awk -F': ' '/Maximum atomic transfer length:/ {print $2+0; exit}' "$state/aw-bl.txt")
	[ "${max:-0}" -gt 0 ] || { echo "no atomic writes advertised"; return 1; }
	sg_vpd -p ble "$SD" >"$state/aw-ble.txt" 2>&1
	grep -i scattered "$state/aw-ble.txt"
	grep -Eq 'Maximum scattered LBA range descriptor count: [1-9]' "$state/aw-ble.txt" || return 1
	sg_vpd -p 0 "$SD" | tee "$state/aw-pages.txt" | grep -iE '0xb7|0xc0'
	grep -qi '0xc0' "$state/aw-pages.txt"
}
check atomic-vpd-bl-ble aw_vpd

aw_kernel_limits() {
	local q
	for q in atomic_write_max_bytes atomic_write_unit_min_bytes atomic_write_unit_max_bytes \
		atomic_write_boundary_bytes; do
		echo "$q: $(aw_sysfs $q)"
	done
	[ "$(aw_sysfs atomic_write_unit_max_bytes)" -gt 0 ] && [ "$(aw_sysfs atomic_write_max_bytes)" -gt 0 ]
}
check atomic-kernel-limits aw_kernel_limits

# sg_write_x --atomic (16 or 32) of N blocks at LBA, then read back; blocks
# before and after stay zero.
aw_sgwx_atomic() {
	local cdb=$1 lba=$2 n=$3 f=$state/aw-data-$1
	aw_zero $((lba - 1)) $((n + 2)) || return 1
	aw_pattern "$f" $((n * 512))
	sg_write_x --atomic=0 ${cdb:+"$cdb"} --lba="$lba" --num="$n" --in="$f" "$SD" || return 1
	cmp <(aw_read "$lba" "$n") "$f" || return 1
	cmp <(aw_read $((lba - 1)) 1) <(head -c 512 /dev/zero) &&
		cmp <(aw_read $((lba + n)) 1) <(head -c 512 /dev/zero)
}
check atomic-sg_write_x-16 aw_sgwx_atomic "" $((aw_base + 8)) 16
check atomic-sg_write_x-32 aw_sgwx_atomic --32 $((aw_base + 64)) 32

aw_too_long() {
	local max f=$state/aw-long
	max=$(awk -F': ' '/Maximum atomic transfer length:/ {print $2+0; exit}' "$state/aw-bl.txt")
	aw_pattern "$f" $(((max + 1) * 512))
	sg_write_x -v --atomic=0 --lba=$((aw_base + 1024)) --num=$((max + 1)) --in="$f" "$SD" \
		>"$state/aw-long.txt" 2>&1
	cat "$state/aw-long.txt"
	grep -qi 'invalid field in cdb' "$state/aw-long.txt"
}
check atomic-over-max-refused aw_too_long

# sg_write_x --scattered: 3 ranges, data in range order.  sg3-utils 1.46's
# sg_write_x (1.24) sends zeroes as the data with --lba=/--num= (it never
# reads IF on that path), so the test builds the whole Data-Out Buffer
# (header, descriptors, data) itself and sends it with --combined=1
# (LOGICAL BLOCK DATA OFFSET 1): the same command, data that can be checked.
aw_scat_buf() { # aw_scat_buf OUT DATA LBA,NUM... -> header + descriptors in 512 bytes, then DATA
	local out=$1 data=$2 r
	shift 2
	{
		head -c 32 /dev/zero
		for r in "$@"; do
			printf '%016x%08x' "${r%,*}" "${r#*,}" | xxd -r -p
			head -c 20 /dev/zero
		done
	} >"$out"
	truncate -s 512 "$out" && cat "$data" >>"$out"
}
aw_sgwx_scattered() {
	local cdb=$1 b=$2 f=$state/aw-scat-$1 buf=$state/aw-scatbuf-$1
	aw_zero "$b" 64 || return 1
	aw_pattern "$f" $((7 * 512))
	aw_scat_buf "$buf" "$f" $((b + 40)),2 $((b + 2)),4 $((b + 20)),1
	sg_write_x --scattered=3 --combined=1 ${cdb:+"$cdb"} --in="$buf" "$SD" || return 1
	cmp <(aw_read $((b + 40)) 2) <(head -c 1024 "$f") &&
		cmp <(aw_read $((b + 2)) 4) <(tail -c +1025 "$f" | head -c 2048) &&
		cmp <(aw_read $((b + 20)) 1) <(tail -c +3073 "$f") || return 1
	# nothing else in the 64 blocks changed
	cmp <(aw_read "$b" 2) <(head -c 1024 /dev/zero) &&
		cmp <(aw_read $((b + 6)) 14) <(head -c $((14 * 512)) /dev/zero) &&
		cmp <(aw_read $((b + 21)) 19) <(head -c $((19 * 512)) /dev/zero) &&
		cmp <(aw_read $((b + 42)) 22) <(head -c $((22 * 512)) /dev/zero)
}
check scattered-sg_write_x-16 aw_sgwx_scattered "" $((aw_base + 2048))
check scattered-sg_write_x-32 aw_sgwx_scattered --32 $((aw_base + 4096))

aw_scattered_overlap() {
	local f=$state/aw-ovl
	aw_pattern "$f" $((4 * 512))
	aw_scat_buf "$f.buf" "$f" $((aw_base + 6000)),2 $((aw_base + 6001)),2
	sg_write_x -v --scattered=2 --combined=1 --in="$f.buf" "$SD" >"$state/aw-ovl.txt" 2>&1
	cat "$state/aw-ovl.txt"
	grep -qi 'invalid field in parameter list' "$state/aw-ovl.txt"
}
check scattered-overlap-refused aw_scattered_overlap

# RWF_ATOMIC through O_DIRECT at the kernel's atomic unit max, then one
# above it (the kernel refuses that itself: EINVAL, exit 2).
aw_rwf_atomic() {
	local umax rc
	umax=$(aw_sysfs atomic_write_unit_max_bytes)
	[ "${umax:-0}" -gt 0 ] || return 1
	"$SLATE_BUILD/tests/atomic_rw" "$SD" $(((aw_base + 8192) * 512)) "$umax" 7 || return 1
	"$SLATE_BUILD/tests/atomic_rw" "$SD" $(((aw_base + 8192) * 512)) "$(aw_sysfs atomic_write_unit_min_bytes)" 8 ||
		return 1
	"$SLATE_BUILD/tests/atomic_rw" "$SD" $(((aw_base + 8192) * 512)) $((umax * 2)) 9
	rc=$?
	[ "$rc" = 2 ]
}
check atomic-rwf-atomic-o-direct aw_rwf_atomic

# Off again: the Block Limits page says 0 and WRITE ATOMIC(16) is no longer
# offered (INVALID COMMAND OPERATION CODE).  Linux 6.12's sd keeps the
# queue's old atomic limits when MAXIMUM ATOMIC TRANSFER LENGTH drops to 0
# (sd_config_atomic returns early), so sysfs is printed, not checked.
aw_disable() {
	local f=$state/aw-off.bin
	ctl namespace_set name=shared atomic_write_max=0 >/dev/null || return 1
	echo 1 >"/sys/block/${SD#/dev/}/device/rescan"
	sleep 1
	echo "sysfs atomic_write_unit_max_bytes after: $(aw_sysfs atomic_write_unit_max_bytes)"
	sg_vpd -p bl "$SD" | grep -i 'maximum atomic transfer length:' | tee "$state/aw-bl-off.txt"
	grep -Eq 'Maximum atomic transfer length: *0( |$)' "$state/aw-bl-off.txt" || return 1
	aw_pattern "$f" 4096
	! sg_write_x --atomic=0 --lba=$((aw_base + 8)) --num=8 --in="$f" "$SD" 2>"$state/aw-off.err" || return 1
	cat "$state/aw-off.err"
	grep -Eqi 'invalid (command )?op(eration)? ?code|illegal request' "$state/aw-off.err"
}
check atomic-disable-at-runtime aw_disable
