#!/bin/bash
# tests/e2e/native-atomic.sh — the native atomic-write path (core/atomic.c
# CORE_ATOMIC_NATIVE) on a block device that has RWF_ATOMIC.
#
# On the host: boots ../shared/tools/linuxvm and runs this script inside
# with --inside.  Inside: scsi_debug with atomic writes (atomic_wr=1,
# granularity and alignment 1 block) gives a SCSI disk whose
# queue/atomic_write_unit_max_bytes is non-zero; slated serves it as a
# `file` namespace (path = the disk, 4 KiB blocks) over NVMe/TCP.  Checks:
# slated chose the native path (log line, namespace_list atomic.path),
# the Linux NVMe host sees atomic limits, an RWF_ATOMIC O_DIRECT write of
# 16 KiB from the host lands and reads back (tests/e2e/atomic_rw.c), and
# slated counted it as a native write (atomic.native_writes).  SKIP lines
# when the kernel's scsi_debug has no atomic writes.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "${1:-}" != --inside ]; then
	slate_vm_run e2e-native-atomic 900 tests/e2e/native-atomic.sh --inside
	exit
fi

NQN=nqn.2026-12.io.slate:native
PORT=4420
logdir=$SLATE_LOGDIR
mkdir -p "$logdir"
log=$logdir/slated.log
: >"$log"
state=/tmp/slate-e2e-native
rm -rf "$state"
mkdir -p "$state"
check() { slate_check e2e-native "$@"; }

if ! modinfo scsi_debug 2>/dev/null | grep -q '^parm: *atomic_wr:'; then
	slate_result SKIP e2e-native.atomic "" "scsi_debug of $(uname -r) has no atomic_wr parameter"
	exit 0
fi
modprobe scsi_debug atomic_wr=1 atomic_wr_gran=1 atomic_wr_align=1 atomic_wr_max_length=128 \
	dev_size_mb=64 sector_size=512 || {
	slate_result FAIL e2e-native.scsi_debug "" "modprobe scsi_debug atomic_wr=1 failed"
	exit 1
}
sd=
for i in $(seq 1 100); do
	for d in /sys/bus/pseudo/drivers/scsi_debug/adapter*/host*/target*/*/block/*; do
		[ -e "$d" ] && sd=${d##*/}
	done
	[ -n "$sd" ] && [ -b "/dev/$sd" ] && break
	sleep 0.1
done
echo "scsi_debug disk: /dev/$sd unit_max=$(cat /sys/block/$sd/queue/atomic_write_unit_max_bytes 2>/dev/null) unit_min=$(cat /sys/block/$sd/queue/atomic_write_unit_min_bytes 2>/dev/null)" |
	tee "$logdir/device.log"
if [ -z "$sd" ] || [ "$(cat /sys/block/$sd/queue/atomic_write_unit_max_bytes 2>/dev/null || echo 0)" = 0 ]; then
	slate_result SKIP e2e-native.atomic "$logdir/device.log" "the scsi_debug disk has no atomic write unit"
	exit 0
fi

cat >"$state/slate.json" <<JSON
{"options": {"allow_block_devices": true}, "config": [
  {"method": "namespace_create", "params": {"name": "nat0", "backend": "file", "path": "/dev/$sd", "adopt": true, "size": "64M", "block_size": 4096, "atomic_write_max": "64K"}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$NQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "nat0"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $PORT}}
]}
JSON
# The multipath head shows atomic limits only from 6.14 (stacked limits): with
# nvme_core multipath off nvme0n1 is the path device itself (as in nvme-linux.sh).
modprobe -r nvme_tcp nvme_fabrics nvmet_tcp nvmet nvme_core 2>/dev/null
modprobe nvme_core multipath=N && modprobe nvme_tcp
echo "nvme_core multipath=$(cat /sys/module/nvme_core/parameters/multipath)" >>"$logdir/device.log"
check start slate_start "$state/run" "$state/slate.json" "$PORT" "$log"
trap 'nvme disconnect-all >/dev/null 2>&1; slate_stop >/dev/null 2>&1' EXIT
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }

check native-log grep -q "namespace nat0: atomic writes: native RWF_ATOMIC on /dev/$sd" "$log"
check native-rpc sh -c "'$SLATE_BUILD/slatectl' -s '$state/run/slated.sock' --json namespace_list | grep -A3 '\"atomic\"' | grep -q '\"path\": *\"native\"'"

dev=
connect() {
	nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$NQN" || return 1
	for i in $(seq 1 100); do
		for n in /sys/class/nvme/nvme*/nvme*n1 /sys/class/nvme-subsystem/nvme-subsys*/nvme*n1; do
			[ -e "$n" ] || continue
			grep -q "^$NQN\$" "$(dirname "$n")/subsysnqn" 2>/dev/null || continue
			[ -b "/dev/${n##*/}" ] && dev=/dev/${n##*/} && return 0
		done
		sleep 0.1
	done
	return 1
}
check connect connect
dev=
for n in /sys/class/nvme-subsystem/nvme-subsys*/nvme*n1 /sys/class/nvme/nvme*/nvme*n1; do
	[ -e "$n" ] && grep -q "^$NQN\$" "$(dirname "$n")/subsysnqn" 2>/dev/null && [ -b "/dev/${n##*/}" ] &&
		dev=/dev/${n##*/} && break
done
echo "nvme namespace $dev unit_max=$(cat /sys/block/${dev##*/}/queue/atomic_write_unit_max_bytes 2>/dev/null)" |
	tee -a "$logdir/device.log"
{ nvme id-ns "$dev" | grep -iE '^(nsfeat|nawun|nawupf|nacwu)'; ctl --json namespace_list | grep -A12 '"atomic"'; } >>"$logdir/device.log" 2>&1
check host-limits sh -c "[ \"\$(cat /sys/block/${dev##*/}/queue/atomic_write_unit_max_bytes)\" -ge 16384 ]"
before=$(ctl --json namespace_list | grep -o '"native_writes": *[0-9]*' | grep -o '[0-9]*$')
check rwf-atomic-write "$SLATE_BUILD/tests/atomic_rw" "$dev" 65536 16384 7
after=$(ctl --json namespace_list | grep -o '"native_writes": *[0-9]*' | grep -o '[0-9]*$')
echo "native_writes before $before after $after" | tee -a "$logdir/device.log"
check native-counted test "${after:-0}" -gt "${before:-0}"
nvme disconnect-all >/dev/null 2>&1
check stop slate_stop
check sanitizer-clean slate_sanitizer_clean "$log"
echo "$slate_npass passed, $slate_nfail failed"
[ "$slate_nfail" = 0 ]
