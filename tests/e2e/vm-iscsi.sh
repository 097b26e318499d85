#!/bin/bash
# tests/e2e/vm-iscsi.sh — runs INSIDE linuxvm (started by iscsi-linux.sh).
#
# slated (the ASan build when present) on 127.0.0.1:3260 with a 256 MiB file
# namespace; open-iscsi (iscsid + iscsiadm via peers.sh) discovers and logs
# in; sg3_utils checks INQUIRY (vendor SLATE), VPD (83h has NAA and UUID
# designators), READ CAPACITY (= the namespace size), MODE SENSE, and
# REPORT SUPPORTED OPERATION CODES (READ(16)/WRITE(16)/COMPARE AND WRITE
# listed, UNMAP and GET LBA STATUS too: thin provisioning); large transfers
# (Block Limits 32 MiB / 1 MiB and the queue limits Linux derives; dd of
# 16 and 8 MiB with max_sectors_kb raised, sg_dd 8 MiB WRITE(16)/READ(16),
# a READ(16) above the limit refused); then ext4, files with
# sha256 sums, fio randwrite with crc32c verify at 4 KiB and 128 KiB;
# logout, SIGTERM, restart, login, fsck, and the sums again.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
. ../shared/tools/linuxvm/peers.sh
[ "${LINUXVM:-}" = 1 ] || slate_die "run me inside linuxvm"

logdir=$SLATE_LOGDIR
mkdir -p "$logdir"
SIZE_MIB=256
port=3260
state=$SLATE_BUILD/e2e-state
rm -rf "$state"
mkdir -p "$state"
[ -x "$SLATE_BUILD/slated" ] || SLATE_BUILD=$SLATE_ROOT/build
export SLATE_BUILD
daemon_log=$logdir/slated.log
: >"$daemon_log"
slate_write_config "$state/slate.json" "$port" file "$SIZE_MIB" "$state/ns0.img"
mnt=/tmp/e2e-mnt
mkdir -p "$mnt"
dev=
fail=0
broken= # set once a step that later ones need has failed

# step NAME CMD... — run CMD with its output in $logdir/NAME.log; PASS/FAIL.
step() {
	local name=$1 log=$logdir/$1.log
	shift
	if [ -n "$broken" ]; then
		slate_result FAIL "e2e.$name" "" "not run: $broken failed"
		fail=1
		return 1
	fi
	if "$@" >"$log" 2>&1; then
		slate_result PASS "e2e.$name"
		return 0
	fi
	slate_result FAIL "e2e.$name" "$log"
	fail=1
	return 1
}

start_slated() {
	# Unix sockets do not work on the 9p share: the RPC socket lives in the VM's /tmp.
	slate_start "$state/run" "$state/slate.json" "$port" "$daemon_log" -r /tmp/slated-e2e.sock &&
		echo "slated pid $SLATE_PID"
}
login() {
	dev=$(iscsi_login "$SLATE_IQN" 127.0.0.1 "$port") || return 1
	echo "disk: $dev"
	# the disk node may need a moment to answer after it appears
	for _ in $(seq 1 50); do
		blockdev --getsize64 "$dev" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
logout() {
	iscsi_logout "$SLATE_IQN" 127.0.0.1 "$port"
}

check_inq() {
	sg_inq "$dev" && sg_inq "$dev" | grep -E 'Vendor identification: *SLATE'
}
check_vpd() {
	sg_vpd -a "$dev" || return 1
	local di
	di=$(sg_vpd -p di "$dev") || return 1
	echo "$di"
	echo "$di" | grep -qiE 'designator[ _]type: NAA' || {
		echo "no NAA designator in VPD 83h"
		return 1
	}
	echo "$di" | grep -qiE 'designator[ _]type: UUID' || {
		echo "no UUID designator in VPD 83h"
		return 1
	}
}
check_readcap() {
	local out blocks bs
	out=$(sg_readcap -l "$dev") || return 1
	echo "$out"
	blocks=$(echo "$out" | sed -n 's/.*Number of logical blocks=\([0-9]*\).*/\1/p')
	bs=$(echo "$out" | sed -n 's/.*Logical block length=\([0-9]*\) bytes.*/\1/p')
	[ -n "$blocks" ] && [ -n "$bs" ] || return 1
	echo "capacity $((blocks * bs)) bytes, expected $((SIZE_MIB << 20))"
	[ $((blocks * bs)) = $((SIZE_MIB << 20)) ] && [ "$(blockdev --getsize64 "$dev")" = $((SIZE_MIB << 20)) ]
}
check_modes() {
	local out
	out=$(sg_modes -a "$dev") || return 1
	echo "$out"
	echo "$out" | grep -qi 'Caching' && echo "$out" | grep -qi 'Control'
}
check_opcodes() {
	local out op
	out=$(sg_opcodes "$dev") || return 1
	echo "$out"
	for op in 'Read\(16\)' 'Write\(16\)' 'Compare and write' '^ *42 .*Unmap' 'Get LBA status' \
		'Extended copy\(LID1\)' 'Populate token' 'Write using token' 'Receive ROD token'; do
		echo "$out" | grep -qiE "$op" || {
			echo "missing: $op"
			return 1
		}
	done
}
# Large transfers: Block Limits says 32 MiB maximum, 1 MiB optimal; Linux
# takes its hardware limit from the maximum (capped by iscsi_tcp's 0xFFFF
# sectors) and optimal_io_size from the optimal one.
blk() { cat "/sys/block/${dev##*/}/queue/$1"; }
check_big_limits() {
	local bl
	bl=$(sg_vpd -p bl "$dev") || return 1
	echo "$bl"
	echo "$bl" | grep -qiE 'Maximum transfer length: 65536 blocks' &&
		echo "$bl" | grep -qiE 'Optimal transfer length: 2048 blocks' || return 1
	echo "max_hw_sectors_kb $(blk max_hw_sectors_kb) max_sectors_kb $(blk max_sectors_kb)" \
		"optimal_io_size $(blk optimal_io_size)"
	[ "$(blk max_hw_sectors_kb)" = 32767 ] && [ "$(blk optimal_io_size)" = 1048576 ]
}
xfer_pool() { "$SLATE_BUILD/slatectl" -s /tmp/slated-e2e.sock --json daemon_status |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["xfer_pool"][sys.argv[1]])' "$1"; }
big_dd() {
	local g0 g1
	head -c $((16 << 20)) /dev/urandom >/tmp/e2e-big || return 1
	g0=$(xfer_pool grants) || return 1
	echo 16384 >"/sys/block/${dev##*/}/queue/max_sectors_kb" || return 1
	dd if=/tmp/e2e-big of="$dev" bs=16M count=1 oflag=direct seek=2 &&
		dd if="$dev" of=/tmp/e2e-back bs=8M count=2 iflag=direct skip=4 &&
		cmp /tmp/e2e-big /tmp/e2e-back || return 1
	g1=$(xfer_pool grants) || return 1
	echo "large-buffer grants $g0 -> $g1, peak $(xfer_pool peak_bytes) bytes in use"
	# The kernel really sent transfers far above the old 1 MiB limit (the 8 MiB
	# reads at least: how it splits the 16 MiB write depends on how contiguous
	# dd's buffer is in guest memory, once 15 + 1 MiB): slated lent buffers that big.
	[ "$g1" -ge $((g0 + 3)) ] && [ "$(xfer_pool peak_bytes)" -ge $((8 << 20)) ]
}
# One 8 MiB WRITE(16) with its Data-Out and one READ(16), through SG_IO
# (sg_dd; sg_raw stops at 1 MiB).
sg_dd_8m() {
	local g0 g1
	head -c $((8 << 20)) /dev/urandom >/tmp/e2e-8m || return 1
	g0=$(xfer_pool grants) || return 1
	sg_dd blk_sgio=1 cdbsz=16 bs=512 bpt=16384 count=16384 seek=131072 if=/tmp/e2e-8m \
		of="$dev" verbose=2 &&
		sg_dd blk_sgio=1 cdbsz=16 bs=512 bpt=16384 count=16384 skip=131072 if="$dev" \
			of=/tmp/e2e-8m.back verbose=2 || return 1
	cmp /tmp/e2e-8m /tmp/e2e-8m.back || return 1
	g1=$(xfer_pool grants) || return 1
	echo "large-buffer grants $g0 -> $g1"
	[ "$g1" -ge $((g0 + 2)) ]
}
# A READ(16) of 65537 blocks (one more than the maximum) with room for one block:
# ILLEGAL REQUEST, INVALID FIELD IN CDB, and the disk still works.
sg_raw_over() {
	local out
	out=$(sg_raw -r 512 "$dev" 88 00 00 00 00 00 00 00 00 00 00 01 00 01 00 00 2>&1)
	echo "$out"
	echo "$out" | grep -qi 'Illegal Request' && echo "$out" | grep -qi 'Invalid field in cdb' &&
		sg_raw -r 512 "$dev" 88 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 >/dev/null
}
make_files() {
	local i
	mkfs.ext4 -F -q "$dev" && mount "$dev" "$mnt" || return 1
	mkdir -p "$mnt/data"
	for i in 1 2 3 4 5 6 7 8; do
		dd if=/dev/urandom of="$mnt/data/f$i" bs=64k count=$((i * 13)) status=none || return 1
	done
	seq 1 100000 >"$mnt/data/text"
	(cd "$mnt/data" && sha256sum f* text) >/tmp/e2e-sums && sync && cat /tmp/e2e-sums
}
run_fio() { # BS SIZE (4 KiB: 16 MiB, 4096 random writes at QD 32 then read
	# back and checked; 64 MiB of them took 120 s of the TCG guest)
	fio --name=v --filename="$mnt/fio-$1" --rw=randwrite --bs="$1" --iodepth=32 \
		--ioengine=libaio --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--size="$2" && rm -f "$mnt/fio-$1"
}
unmount_logout() {
	umount "$mnt" && logout
}
verify_files() {
	e2fsck -fn "$dev" && mount "$dev" "$mnt" && (cd "$mnt/data" && sha256sum -c /tmp/e2e-sums) &&
		umount "$mnt"
}

step start start_slated || broken=start
step iscsid iscsid_start || broken=iscsid
step login login || broken=login
step sg_inq check_inq
step sg_vpd check_vpd
step sg_readcap check_readcap
step sg_modes check_modes
step sg_opcodes check_opcodes
step big-limits check_big_limits
step big-dd-16m-8m big_dd
step sg_dd-8m-write16-read16 sg_dd_8m
step sg_raw-over-limit sg_raw_over
step mkfs-files make_files || broken=mkfs-files
step fio-randwrite-4k-verify run_fio 4k 16M
step fio-randwrite-128k-verify run_fio 128k 64M
step umount-logout unmount_logout || broken=umount-logout
step clean-stop slate_stop TERM || broken=clean-stop
step restart start_slated || broken=restart
step relogin login || broken=relogin
step files-after-restart verify_files
step final-logout logout
step final-stop slate_stop TERM
if ! slate_sanitizer_clean "$daemon_log"; then
	slate_result FAIL e2e.sanitizer "$daemon_log" "sanitizer report in slated.log"
	fail=1
fi
exit $fail
