#!/bin/bash
# tests/e2e/vm-iscsi.sh — runs INSIDE linuxvm (started by iscsi-linux.sh).
#
# slated (the ASan build when present) on 127.0.0.1:3260 with a 256 MiB file
# namespace; open-iscsi (iscsid + iscsiadm via peers.sh) discovers and logs
# in; sg3_utils checks INQUIRY (vendor SLATE), VPD (83h has NAA and UUID
# designators), READ CAPACITY (= the namespace size), MODE SENSE, and
# REPORT SUPPORTED OPERATION CODES (READ(16)/WRITE(16)/COMPARE AND WRITE
# listed, UNMAP and GET LBA STATUS too: thin provisioning); then ext4, files with
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
run_fio() { # BS
	fio --name=v --filename="$mnt/fio-$1" --rw=randwrite --bs="$1" --iodepth=32 \
		--ioengine=libaio --direct=1 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--size=64M && rm -f "$mnt/fio-$1"
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
step mkfs-files make_files || broken=mkfs-files
step fio-randwrite-4k-verify run_fio 4k
step fio-randwrite-128k-verify run_fio 128k
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
