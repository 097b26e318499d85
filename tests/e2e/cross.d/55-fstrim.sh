# tests/e2e/cross.d/55-fstrim.sh — sourced by tests/e2e/cross-linux.sh.
# File systems give space back through both transports: a scratch thin
# file namespace per transport, created at runtime ("trimi" as LUN 1 of
# $XIQN, "trimn" as NSID 3 of $XNQN), each formatted with ext4 and then
# xfs.  Write a 64 MiB file, sync, delete it: the backing file keeps its
# size until `fstrim` sends the discards (iSCSI UNMAP, NVMe Dataset
# Management with AD), then it shrinks by about what was freed (the file
# system's own metadata is the slack).  `blkdiscard` of the whole device
# empties the backing file and the device reads zeroes.  Both namespaces
# are removed again at the end.

trim_kib() { sync; du -k "$1" | awk '{print $1}'; }
trim_hctl() { basename "$(readlink -f "/sys/block/${SD#/dev/}/device")"; } # H:C:T:L of $SD
trim_sd_lun() { # LUN -> the iSCSI host's disk for that LUN of $XIQN
	local hctl d
	hctl=$(trim_hctl)
	for d in /sys/class/scsi_device/"${hctl%:*}:$1"/device/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}
trim_nv_nsid() { # NSID -> the NVMe host's block device for it
	local d n
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$XNQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = "$1" ] || continue
			[ -b "/dev/${n##*/}" ] && { echo "/dev/${n##*/}"; return 0; }
		done
	done
	return 1
}
trim_drain_ua() { for _ in 1 2 3 4; do sg_turs "$SD" >/dev/null 2>&1; done; }

TRIM_SD= TRIM_NV=
trim_setup() {
	local hctl h c t
	ctl namespace_create name=trimi backend=file path="$state/trimi.img" size=512M || return 1
	ctl namespace_create name=trimn backend=file path="$state/trimn.img" size=512M || return 1
	ctl iscsi_lun_map target="$XIQN" lun=1 namespace=trimi || return 1
	ctl nvmf_ns_attach nqn="$XNQN" namespace=trimn nsid=3 || return 1
	trim_drain_ua
	hctl=$(trim_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t 1" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 trim_sd_lun 1 || { echo "LUN 1 did not appear"; return 1; }
	wait_for 10 trim_nv_nsid 3 || { echo "NSID 3 did not appear"; return 1; }
	TRIM_SD=$(trim_sd_lun 1) TRIM_NV=$(trim_nv_nsid 3)
	echo "iSCSI LUN 1: $TRIM_SD (discard_max_bytes $(cat "/sys/block/${TRIM_SD#/dev/}/queue/discard_max_bytes")); NVMe NSID 3: $TRIM_NV"
	[ "$(cat "/sys/block/${TRIM_SD#/dev/}/queue/discard_max_bytes")" -gt 0 ] &&
		[ "$(cat "/sys/block/${TRIM_NV#/dev/}/queue/discard_max_bytes")" -gt 0 ]
}
check fstrim-scratch-namespaces trim_setup

# trim_fs DEV IMG FS TRANSPORT
trim_fs() {
	local dev=$1 img=$2 fs=$3 what=$4 mnt=$state/mnt-trim before afterrm after
	[ -b "$dev" ] || return 1
	case $fs in
	ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev" || return 1 ;;
	xfs) mkfs.xfs -q -f "$dev" || return 1 ;;
	esac
	mkdir -p "$mnt"
	mount "$dev" "$mnt" || return 1
	[ -s "$state/rand64" ] || head -c 64M /dev/urandom >"$state/rand64"
	if ! cp "$state/rand64" "$mnt/big"; then
		umount "$mnt"
		return 1
	fi
	sync
	before=$(trim_kib "$img")
	rm "$mnt/big"
	sync
	afterrm=$(trim_kib "$img")
	fstrim -v "$mnt" >"$state/fstrim.txt" 2>&1
	local rc=$?
	after=$(trim_kib "$img")
	umount "$mnt" || return 1
	echo "$fs over $what: backing file $before KiB with the 64 MiB file, $afterrm KiB after rm," \
		"$after KiB after fstrim ($(cat "$state/fstrim.txt"))"
	[ "$rc" = 0 ] && [ $((afterrm - after)) -ge $((56 * 1024)) ]
}
check fstrim-ext4-iscsi trim_fs "$TRIM_SD" "$state/trimi.img" ext4 iSCSI
check fstrim-xfs-iscsi trim_fs "$TRIM_SD" "$state/trimi.img" xfs iSCSI
check fstrim-ext4-nvme trim_fs "$TRIM_NV" "$state/trimn.img" ext4 NVMe/TCP
check fstrim-xfs-nvme trim_fs "$TRIM_NV" "$state/trimn.img" xfs NVMe/TCP

# trim_blkdiscard DEV IMG TRANSPORT
trim_blkdiscard() {
	local dev=$1 img=$2 what=$3 before after
	[ -b "$dev" ] || return 1
	dd if=/dev/urandom of="$dev" bs=1M seek=100 count=32 oflag=direct 2>/dev/null || return 1
	before=$(trim_kib "$img")
	blkdiscard "$dev" || return 1
	after=$(trim_kib "$img")
	echo "blkdiscard over $what: backing file $before KiB -> $after KiB"
	[ "$before" -ge $((32 * 1024)) ] && [ "$after" -le 1024 ] || return 1
	cmp -n $((32 << 20)) <(dd if="$dev" iflag=direct bs=1M skip=100 count=32 2>/dev/null) /dev/zero
}
check blkdiscard-iscsi trim_blkdiscard "$TRIM_SD" "$state/trimi.img" iSCSI
check blkdiscard-nvme trim_blkdiscard "$TRIM_NV" "$state/trimn.img" NVMe/TCP

trim_teardown() {
	[ -n "$TRIM_SD" ] && echo 1 >"/sys/block/${TRIM_SD#/dev/}/device/delete"
	ctl iscsi_lun_unmap target="$XIQN" lun=1 || return 1
	ctl nvmf_ns_detach nqn="$XNQN" nsid=3 || return 1
	trim_drain_ua
	wait_for 10 sh -c "! test -b '$TRIM_NV'" || return 1
	ctl namespace_delete name=trimi && ctl namespace_delete name=trimn
}
check fstrim-scratch-removed trim_teardown
