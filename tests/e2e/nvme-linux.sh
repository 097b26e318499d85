#!/bin/bash
# tests/e2e/nvme-linux.sh — the Linux kernel as the NVMe/TCP host (DESIGN.md "Tests").
#
# On the host: boots ../shared/tools/linuxvm and runs this same script inside
# with --inside.  Inside the VM: slated with a file namespace exported both
# as an NVMe namespace (subsystem + NVMe/TCP listener on 127.0.0.1:4420) and
# as iSCSI LUN 0; then nvme-cli discovery, connect (plain, with header and
# data digests, with 2 I/O queues), list/id-ctrl/id-ns/ns-descs/smart-log/
# error-log/get-feature 7, a file system with checksummed files, fio with
# crc32c verification (4 KiB and 128 KiB, iodepth 32), disconnect, restart
# of slated, reconnect and the checksums again, nvme reset, keep-alive
# expiry of a silent host, and NVMe -> iSCSI cross-transport data and
# identity checks.  One PASS/FAIL line per check.
#
# NVMe RPC method names (src/mgmt/rpc.c) can be overridden: NVMF_RPC_SUBSYS,
# NVMF_RPC_HOST, NVMF_RPC_NS, NVMF_RPC_LISTENER.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "${1:-}" != --inside ]; then
	logdir=$SLATE_LOGDIR/e2e-nvme
	mkdir -p "$logdir"
	vm=${LINUXVM:-../shared/tools/linuxvm/linuxvm}
	[ -x "$vm" ] || {
		slate_result FAIL e2e-nvme.vm "" "linuxvm not found at $vm"
		exit 1
	}
	"$vm" --timeout "${E2E_TIMEOUT:-1200}" --env "SLATE_BUILD=$SLATE_BUILD" \
		--env "SLATE_LOGDIR=$logdir" -- tests/e2e/nvme-linux.sh --inside \
		>"$logdir/vm.stdout" 2>"$logdir/vm.stderr"
	rc=$?
	grep -E '^(PASS|FAIL|SKIP) |^    \| ' "$logdir/vm.stdout"
	case $rc in
	124) slate_result FAIL e2e-nvme.vm "$logdir/vm.stderr" "linuxvm timed out" ;;
	125) slate_result FAIL e2e-nvme.vm "$logdir/vm.stderr" "the VM failed to boot or run" ;;
	esac
	exit $rc
fi

# ---------------------------------------------------------------- inside the VM
NVMF_RPC_SUBSYS=${NVMF_RPC_SUBSYS:-nvmf_subsystem_create}
NVMF_RPC_HOST=${NVMF_RPC_HOST:-nvmf_subsystem_add_host}
NVMF_RPC_NS=${NVMF_RPC_NS:-nvmf_ns_attach}
NVMF_RPC_LISTENER=${NVMF_RPC_LISTENER:-nvmf_listener_add}
NQN=nqn.2026-12.io.slate:e2e
PORT=4420
ISCSI_PORT=3260
logdir=$SLATE_LOGDIR
mkdir -p "$logdir"
log=$logdir/slated.log
: >"$log"
state=/tmp/slate-e2e-nvme
rm -rf "$state"
mkdir -p "$state"
data=$state/nvme0.img
pass=0
fail=0

check() { # check NAME CMD... -> PASS/FAIL line
	local name=$1
	shift
	local out=$logdir/$name.log
	if "$@" >"$out" 2>&1; then
		slate_result PASS "e2e-nvme.$name"
		pass=$((pass + 1))
	else
		slate_result FAIL "e2e-nvme.$name" "$out"
		fail=$((fail + 1))
	fi
}

cat >"$state/slate.json" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "nv0", "backend": "file", "path": "$data", "size": "1024M", "block_size": 512}},
  {"method": "$NVMF_RPC_SUBSYS", "params": {"nqn": "$NQN"}},
  {"method": "$NVMF_RPC_HOST", "params": {"nqn": "$NQN", "host": "*"}},
  {"method": "$NVMF_RPC_NS", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "nv0"}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "nv0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": $ISCSI_PORT}},
  {"method": "$NVMF_RPC_LISTENER", "params": {"addr": "127.0.0.1", "port": $PORT}}
]}
JSON

start() { slate_start "$state/run" "$state/slate.json" "$PORT" "$log"; }
modprobe nvme-tcp 2>/dev/null || true
check start start
trap 'nvme disconnect-all >/dev/null 2>&1; umount /mnt/nv 2>/dev/null; slate_stop >/dev/null 2>&1' EXIT

dev_of() {
	local d n
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
		for n in "$d"/nvme*n*; do
			n=${n##*/}
			[ -b "/dev/$n" ] && { echo "/dev/$n"; return 0; }
		done
	done
	return 1
}
ctrl_of() { basename "$(grep -l "^$NQN\$" /sys/class/nvme/nvme*/subsysnqn | head -1 | xargs dirname)"; }
wait_dev() {
	local i
	for i in $(seq 1 100); do dev_of >/dev/null && return 0; sleep 0.1; done
	return 1
}
connect() { nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$NQN" "$@" && wait_dev; }
disconnect() { nvme disconnect -n "$NQN"; }

check discover sh -c "nvme discover -t tcp -a 127.0.0.1 -s $PORT | grep -q 'subnqn: *$NQN'"
check connect connect
DEV=$(dev_of)
CTRL=/dev/$(ctrl_of)
check list sh -c "nvme list | grep -q '$DEV'"
check id-ctrl sh -c "nvme id-ctrl $CTRL | grep -q 'subnqn *: $NQN'"
check id-ns nvme id-ns "$DEV" -n 1
check ns-descs nvme ns-descs "$DEV" -n 1
check smart-log nvme smart-log "$CTRL"
check error-log nvme error-log "$CTRL"
check get-feature-7 nvme get-feature "$CTRL" -f 7

MKFS=mkfs.xfs
command -v mkfs.xfs >/dev/null || MKFS=mkfs.ext4
fs_files() {
	$MKFS -f "$DEV" >/dev/null 2>&1 || $MKFS -F "$DEV" >/dev/null || return 1
	mkdir -p /mnt/nv && mount "$DEV" /mnt/nv || return 1
	for i in 1 2 3 4; do head -c $((i * 3 * 1048576 + 777)) /dev/urandom >/mnt/nv/f$i; done
	(cd /mnt/nv && sha256sum f*) >"$state/sums" && umount /mnt/nv
}
check "fs-files-$MKFS" fs_files
fio_verify() {
	fio --name=v --filename="$DEV" --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
		--bs="$1" --size=64M --offset=512M --verify=crc32c --do_verify=1 --verify_fatal=1
}
check fio-4k fio_verify 4k
check fio-128k fio_verify 128k
check disconnect disconnect
slate_stop >/dev/null 2>&1
check restart-slated start
check reconnect connect
DEV=$(dev_of)
CTRL=/dev/$(ctrl_of)
verify_files() { mount "$DEV" /mnt/nv && (cd /mnt/nv && sha256sum -c "$state/sums") && umount /mnt/nv; }
check files-after-restart verify_files
check reset sh -c "nvme reset $CTRL && sleep 2 && nvme id-ctrl $CTRL >/dev/null"
check disconnect-2 disconnect
check connect-digests connect --hdr-digest --data-digest
DEV=$(dev_of)
check fio-digests fio_verify 128k
check log-digests grep -q 'hdgst ddgst' "$log"
disconnect >/dev/null 2>&1
check connect-2-io-queues connect --nr-io-queues 2
DEV=$(dev_of)
check fio-2-queues fio_verify 4k
check log-qid-2 grep -q 'qid 2' "$log"

# Keep-alive expiry: a raw host connects with KATO and then stays silent.
kato_expiry() {
	local before
	before=$(grep -c 'closed' "$log")
	python3 - "$PORT" "$NQN" <<'PY' &
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
ic = bytearray(128); ic[0] = 0; ic[2] = 128; ic[4] = 128
s.sendall(ic); s.recv(128)
sqe = bytearray(64); sqe[0] = 0x7f; sqe[1] = 0x40; sqe[4] = 1
struct.pack_into("<I", sqe, 32, 1024); sqe[39] = 0x01
struct.pack_into("<HHHB", sqe, 42, 0, 31, 0)
struct.pack_into("<I", sqe, 48, 2000)  # KATO 2 s
data = bytearray(1024); struct.pack_into("<H", data, 16, 0xffff)
data[256:256 + len(sys.argv[2])] = sys.argv[2].encode()
h = b"nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000kato"
data[512:512 + len(h)] = h
ch = bytes([4, 0, 72, 72]) + struct.pack("<I", 72 + 1024)
s.sendall(ch + sqe + data)
time.sleep(8)
PY
	local py=$!
	sleep 6
	kill $py 2>/dev/null
	wait $py 2>/dev/null
	[ "$(grep -c 'closed' "$log")" -gt "$before" ]
}
check keepalive-expiry kato_expiry
disconnect >/dev/null 2>&1

# One namespace on both transports: NVMe writes, iSCSI reads; same identity.
cross() {
	connect || return 1
	DEV=$(dev_of)
	head -c 1048576 /dev/urandom >"$state/pattern"
	dd if="$state/pattern" of="$DEV" bs=1M count=1 seek=900 oflag=direct || return 1
	nvme id-ns "$DEV" -n 1 -o json >"$state/idns.json"
	nvme ns-descs "$DEV" -n 1 >"$state/descs.txt"
	disconnect
	(iscsid -f >/dev/null 2>&1 &)
	sleep 1
	iscsiadm -m discovery -t st -p "127.0.0.1:$ISCSI_PORT" >/dev/null || return 1
	iscsiadm -m node -T "$SLATE_IQN" -p "127.0.0.1:$ISCSI_PORT" --login >/dev/null || return 1
	local sd i
	for i in $(seq 1 50); do
		sd=$(ls /dev/disk/by-path/*"$SLATE_IQN"*lun-0 2>/dev/null | head -1)
		[ -n "$sd" ] && break
		sd=$(for b in /sys/block/sd*; do grep -q slate -i "$b/device/vendor" 2>/dev/null && echo /dev/${b##*/}; done | head -1)
		[ -n "$sd" ] && break
		sleep 0.2
	done
	[ -n "$sd" ] || return 1
	dd if="$sd" of="$state/back" bs=1M count=1 skip=900 iflag=direct || return 1
	cmp "$state/pattern" "$state/back" || return 1
	# Identity: the NVMe UUID descriptor equals the SCSI VPD 83h UUID designator.
	local nu su
	nu=$(grep -io 'uuid *: *[0-9a-f-]*' "$state/descs.txt" | awk '{print $NF}' | tr -d - | tr A-F a-f)
	su=$(sg_vpd -p di "$sd" 2>/dev/null | grep -io '[0-9a-f]\{8\}-[0-9a-f-]\{27\}' | head -1 | tr -d - | tr A-F a-f)
	echo "nvme uuid $nu scsi uuid $su"
	iscsiadm -m node -T "$SLATE_IQN" -p "127.0.0.1:$ISCSI_PORT" --logout >/dev/null
	[ -n "$nu" ] && [ "$nu" = "$su" ]
}
check nvme-to-iscsi cross

check daemon-alive slate_alive
rc=0
slate_stop || rc=$?
check clean-exit test "$rc" = 0
check sanitizer-clean slate_sanitizer_clean "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
