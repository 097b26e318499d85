#!/bin/bash
# tests/e2e/nvme-linux.sh — the Linux kernel as the NVMe/TCP host (DESIGN.md "Tests").
#
# On the host: boots ../shared/tools/linuxvm and runs this same script inside
# with --inside.  Inside the VM: slated with two file namespaces in one
# subsystem (NVMe/TCP listener on 127.0.0.1:4420): NSID 1 carries an XFS
# file system, NSID 2 is raw (fio) and is also iSCSI LUN 0, so the file
# system and the raw writes never overlap.  Checks: nvme-cli discovery,
# connect (plain, with header and data digests, with 2 I/O queues),
# list/id-ctrl/id-ns/ns-descs/smart-log/error-log/get-feature 7, mkfs.xfs
# with checksummed files, fio with crc32c verification (4 KiB and 128 KiB,
# iodepth 32), disconnect, restart of slated, reconnect and the checksums
# again, nvme reset, keep-alive expiry of a silent host (raw Connect with
# KATO 2 s, then nothing: slated must log the timeout and close the
# socket), NVMe -> iSCSI cross-transport data and identity checks, and NVMe
# Copy within and across runtime-attached namespaces.
# Large transfers: MDTS 13 (32 MiB) and the max_hw_sectors_kb Linux derives
# from it, dd of 8 and 16 MiB with max_sectors_kb raised, a Read of exactly
# MDTS through nvme-cli, and a Read above MDTS (NSID 3 has 4 KiB blocks, so
# 16-bit NLB can exceed it) refused with Invalid Field in Command.  One
# PASS/FAIL line per check.
#
# NVMe RPC method names (src/mgmt/rpc.c) can be overridden: NVMF_RPC_SUBSYS,
# NVMF_RPC_HOST, NVMF_RPC_NS, NVMF_RPC_LISTENER.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

if [ "${1:-}" != --inside ]; then
	slate_vm_run e2e-nvme 1200 tests/e2e/nvme-linux.sh --inside
	exit
fi

# ---------------------------------------------------------------- inside the VM
. ../shared/tools/linuxvm/peers.sh # iscsi_login / iscsi_logout
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
raw=$state/nvme1.img

check() { slate_check e2e-nvme "$@"; } # check NAME CMD... -> one PASS/FAIL line

cat >"$state/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"]}, "config": [
  {"method": "namespace_create", "params": {"name": "nv0", "backend": "file", "path": "$data", "size": "512M", "block_size": 512, "atomic_write_max": "64K"}},
  {"method": "namespace_create", "params": {"name": "nv1", "backend": "file", "path": "$raw", "size": "256M", "block_size": 512}},
  {"method": "namespace_create", "params": {"name": "nv4k", "backend": "mem", "size": "64M", "block_size": 4096}},
  {"method": "$NVMF_RPC_SUBSYS", "params": {"nqn": "$NQN"}},
  {"method": "$NVMF_RPC_HOST", "params": {"nqn": "$NQN", "host": "*"}},
  {"method": "$NVMF_RPC_NS", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "nv0"}},
  {"method": "$NVMF_RPC_NS", "params": {"nqn": "$NQN", "nsid": 2, "namespace": "nv1"}},
  {"method": "$NVMF_RPC_NS", "params": {"nqn": "$NQN", "nsid": 3, "namespace": "nv4k"}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "nv1"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": $ISCSI_PORT}},
  {"method": "$NVMF_RPC_LISTENER", "params": {"addr": "127.0.0.1", "port": $PORT}}
]}
JSON

start() { slate_start "$state/run" "$state/slate.json" "$PORT" "$log"; }
modprobe nvme-tcp 2>/dev/null || true
modprobe xfs 2>/dev/null || true
check start start
trap 'nvme disconnect-all >/dev/null 2>&1; umount /mnt/nv 2>/dev/null; slate_stop >/dev/null 2>&1' EXIT

# dev_of NSID -> the /dev/nvmeXnY of that namespace of $NQN.  The kernel
# numbers namespace heads in the order it finds them, not by NSID (NSID 2
# may well be nvme0n1), so match the nsid attribute.
dev_of() {
	local d n nsid=${1:-1}
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = "$nsid" ] || continue
			n=${n##*/}
			[ -b "/dev/$n" ] && { echo "/dev/$n"; return 0; }
		done
	done
	return 1
}
ctrl_of() { basename "$(grep -l "^$NQN\$" /sys/class/nvme/nvme*/subsysnqn | head -1 | xargs dirname)"; }
wait_dev() {
	local i
	for i in $(seq 1 100); do dev_of 1 >/dev/null && dev_of 2 >/dev/null && return 0; sleep 0.1; done
	return 1
}
connect() { nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$NQN" "$@" && wait_dev; }
disconnect() { nvme disconnect -n "$NQN"; }

check discover sh -c "nvme discover -t tcp -a 127.0.0.1 -s $PORT | grep -q 'subnqn: *$NQN'"
check connect connect
DEV=$(dev_of 1)
RAW=$(dev_of 2)
CTRL=/dev/$(ctrl_of)
echo "fs namespace $DEV, raw namespace $RAW, controller $CTRL" >"$logdir/devices.log"
check list sh -c "nvme list | grep -q '$DEV' && nvme list | grep -q '$RAW'"
check id-ctrl sh -c "nvme id-ctrl $CTRL | grep -q 'subnqn *: $NQN'"
check id-ns nvme id-ns "$DEV" -n 1
check ns-descs nvme ns-descs "$DEV" -n 1

# Atomic writes (core/atomic.h): nv0 is configured with atomic_write_max
# 64 KiB (the default is 0), which Identify Namespace states as NSABP with NAWUPF 127; Linux
# (6.11+) makes that the path device's queue/atomic_write_unit_max_bytes.
# The multipath head (nvmeXnY) shows them only from 6.14 (stacked limits),
# so the RWF_ATOMIC write runs at the end, with multipath off.
aqattr() { cat "/sys/block/$1/queue/$2" 2>/dev/null; }
atomic_sysfs() {
	local base=${DEV##*/} d f ok=1 seen=0
	for d in /sys/block/"$base" /sys/block/"${base%n*}"c*n"${base##*n}"; do
		[ -e "$d/queue/atomic_write_unit_max_bytes" ] || continue
		d=${d##*/}
		echo "$d: $(for f in unit_min unit_max max boundary; do
			printf '%s=%s ' $f "$(aqattr "$d" atomic_write_${f}_bytes)"
		done)"
		[ "$d" = "$base" ] && [ "$(aqattr "$d" atomic_write_unit_max_bytes)" = 0 ] && continue
		seen=1
		[ "$(aqattr "$d" atomic_write_unit_max_bytes)" = 65536 ] &&
			[ "$(aqattr "$d" atomic_write_max_bytes)" = 65536 ] &&
			[ "$(aqattr "$d" atomic_write_boundary_bytes)" = 0 ] || ok=0
	done
	nvme id-ns "$DEV" -n 1 | grep -Ei '^(nsfeat|nawun|nawupf|nacwu|nabsn|nabo|nabspf)'
	[ $seen = 1 ] && [ $ok = 1 ]
}
kernel_atomic=0
if [ -e "/sys/block/${DEV##*/}/queue/atomic_write_unit_max_bytes" ]; then
	kernel_atomic=1
	check atomic-sysfs atomic_sysfs
else
	slate_result SKIP e2e-nvme.atomic "" "kernel $(uname -r) has no atomic write limits (6.11+)"
fi
check smart-log nvme smart-log "$CTRL"
check error-log nvme error-log "$CTRL"
check get-feature-7 nvme get-feature "$CTRL" -f 7

# XFS on NSID 1 (xfsprogs is in the Makefile's TEST_PKGS; no fallback).
fs_files() {
	mkfs.xfs -f "$DEV" || return 1
	mkdir -p /mnt/nv && mount -t xfs "$DEV" /mnt/nv || return 1
	for i in 1 2 3 4; do head -c $((i * 3 * 1048576 + 777)) /dev/urandom >/mnt/nv/f$i; done
	(cd /mnt/nv && sha256sum f*) >"$state/sums" && umount /mnt/nv
}
check mkfs-xfs-files fs_files
# fio verifies on the raw NSID 2, never over the file system of NSID 1.
# 4 KiB writes over 16 MiB (4096 random writes at QD 32, each block once,
# then read back and checked): 64 MiB of them took 69 s of the TCG guest
# and told nothing more; 128 KiB writes over 64 MiB.
fio_verify() { # BS SIZE
	fio --name=v --filename="$RAW" --direct=1 --ioengine=libaio --iodepth=32 --rw=randwrite \
		--bs="$1" --size="$2" --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--verify_state_save=0
}
check fio-4k fio_verify 4k 16M
check fio-128k fio_verify 128k 64M

# Large transfers (NSID 2 from 96 MiB on: fio used the first 64 MiB, the
# cross-transport check uses 200 MiB).
qattr() { cat "/sys/block/${RAW##*/}/queue/$1"; }
mdts() {
	nvme id-ctrl "$CTRL" | grep -E '^mdts' || return 1
	echo "max_hw_sectors_kb $(qattr max_hw_sectors_kb) max_sectors_kb $(qattr max_sectors_kb)"
	nvme id-ctrl "$CTRL" | grep -qE '^mdts *: 13$' && [ "$(qattr max_hw_sectors_kb)" = 32768 ]
}
check mdts-32m mdts
xfer_pool() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" --json daemon_status |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["xfer_pool"][sys.argv[1]])' "$1"; }
big_dd() {
	local g0 g1
	head -c $((32 << 20)) /dev/urandom >"$state/big" || return 1
	g0=$(xfer_pool grants) || return 1
	echo 16384 >"/sys/block/${RAW##*/}/queue/max_sectors_kb" || return 1
	dd if="$state/big" of="$RAW" bs=8M count=4 oflag=direct seek=12 &&
		dd if="$state/big" of="$RAW" bs=16M count=2 oflag=direct seek=6 || return 1
	dd if="$RAW" of="$state/back" bs=8M count=4 iflag=direct skip=12 &&
		cmp "$state/big" "$state/back" || return 1
	dd if="$RAW" of="$state/back" bs=16M count=2 iflag=direct skip=6 &&
		cmp "$state/big" "$state/back" || return 1
	g1=$(xfer_pool grants) || return 1
	echo "large-buffer grants $g0 -> $g1, peak $(xfer_pool peak_bytes) bytes in use"
	[ "$g1" -ge $((g0 + 12)) ] && [ "$(xfer_pool peak_bytes)" -ge $((16 << 20)) ]
}
check big-dd-8m-16m big_dd
# nvme-cli Read of exactly MDTS (65536 blocks of 512 bytes) matches what dd wrote there.
read_mdts() {
	nvme read "$RAW" --start-block=$((96 << 11)) --block-count=65535 \
		--data-size=$((32 << 20)) --data="$state/mdts" || return 1
	cmp "$state/big" "$state/mdts"
}
check read-exactly-mdts read_mdts
# Above MDTS: 8193 blocks of 4 KiB with a 4 KiB buffer, so the host sends
# it; the controller answers Invalid Field in Command.
over_mdts() {
	local d= out i
	for i in $(seq 1 50); do d=$(dev_of 3) && break; sleep 0.1; done
	[ -n "$d" ] || return 1
	out=$(nvme io-passthru "$d" --opcode=0x02 --namespace-id=3 --data-len=4096 --read \
		--cdw10=0 --cdw11=0 --cdw12=8192 2>&1)
	echo "$out"
	echo "$out" | grep -qi 'Invalid Field in Command' &&
		nvme io-passthru "$d" --opcode=0x02 --namespace-id=3 --data-len=4096 --read \
			--cdw10=0 --cdw11=0 --cdw12=0 >/dev/null
}
check read-over-mdts over_mdts
check disconnect disconnect
slate_stop >/dev/null 2>&1
check restart-slated start
check reconnect connect
DEV=$(dev_of 1)
RAW=$(dev_of 2)
CTRL=/dev/$(ctrl_of)
verify_files() { mount -t xfs "$DEV" /mnt/nv && (cd /mnt/nv && sha256sum -c "$state/sums") && umount /mnt/nv; }
check files-after-restart verify_files
check reset sh -c "nvme reset $CTRL && sleep 2 && nvme id-ctrl $CTRL >/dev/null"
check disconnect-2 disconnect
check connect-digests connect --hdr-digest --data-digest
DEV=$(dev_of 1)
RAW=$(dev_of 2)
check fio-digests fio_verify 128k 64M
check log-digests grep -q 'hdgst ddgst' "$log"
disconnect >/dev/null 2>&1
check connect-2-io-queues connect --nr-io-queues 2
DEV=$(dev_of 1)
RAW=$(dev_of 2)
check fio-2-queues fio_verify 4k 16M
check log-qid-2 grep -q 'qid 2' "$log"

# Keep-alive expiry: a raw host connects an admin queue with KATO 2 s and
# then stays silent; slated must log the timeout and close the socket
# (after KATO plus its grace, not before KATO).
kato_expiry() {
	local before
	before=$(grep -c 'keep-alive timeout' "$log")
	python3 - "$PORT" "$NQN" <<'PY' || return 1
import socket, struct, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(20)
def recvn(n):
    b = b""
    while len(b) < n:
        r = s.recv(n - len(b))
        if not r:
            raise SystemExit("connection closed early")
        b += r
    return b
ic = bytearray(128); ic[0] = 0; ic[2] = 128; ic[4] = 128     # ICReq, PFV 0, no digests
s.sendall(ic)
if recvn(128)[0] != 1:
    raise SystemExit("no ICResp")
sqe = bytearray(64); sqe[0] = 0x7f; sqe[1] = 0x40; sqe[4] = 1  # Fabrics Connect, SGL
struct.pack_into("<I", sqe, 32, 1024); sqe[39] = 0x01          # in-capsule data block, 1 KiB
struct.pack_into("<HHB", sqe, 42, 0, 31, 0)                     # QID 0, SQSIZE 31, CATTR 0
struct.pack_into("<I", sqe, 48, 2000)                           # KATO 2 s
data = bytearray(1024)
data[0:16] = bytes(range(1, 17))                                # HOSTID
struct.pack_into("<H", data, 16, 0xffff)                        # CNTLID: dynamic
data[256:256 + len(sys.argv[2])] = sys.argv[2].encode()
h = b"nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-0000000000ka"
data[512:512 + len(h)] = h
s.sendall(bytes([4, 0, 72, 72]) + struct.pack("<I", 72 + 1024) + sqe + data)
r = recvn(24)                                                   # CapsuleResp: CH + CQE
st = struct.unpack_from("<H", r, 8 + 14)[0] >> 1
if r[0] != 5 or st:
    raise SystemExit("Connect failed: type %d status 0x%x" % (r[0], st))
t0 = time.time()
try:
    x = s.recv(1)
except socket.timeout:
    raise SystemExit("still open 20 s after Connect with KATO 2 s")
dt = time.time() - t0
print("target closed the silent connection after %.1f s (%r)" % (dt, x))
if x or dt < 2.0:
    raise SystemExit("closed before KATO or sent data")
PY
	sleep 0.5
	grep 'keep-alive timeout' "$log" | tail -1
	[ "$(grep -c 'keep-alive timeout' "$log")" -gt "$before" ]
}
check keepalive-expiry kato_expiry
disconnect >/dev/null 2>&1

# One namespace on both transports (NSID 2 = iSCSI LUN 0): NVMe writes,
# iSCSI reads back; the identity is the same on both (NVMe UUID descriptor
# and NGUID = SCSI VPD 83h UUID designator; NVMe EUI-64 = the NAA-6
# designator's extension).
cross() {
	connect || return 1
	RAW=$(dev_of 2)
	head -c 1048576 /dev/urandom >"$state/pattern"
	dd if="$state/pattern" of="$RAW" bs=1M count=1 seek=200 oflag=direct || return 1
	nvme id-ns "$RAW" -n 2 -o json >"$state/idns.json" || return 1
	nvme ns-descs "$RAW" -n 2 >"$state/descs.txt" || return 1
	disconnect
	local sd
	sd=$(iscsi_login "$SLATE_IQN" 127.0.0.1 "$ISCSI_PORT") || return 1
	echo "iSCSI disk $sd"
	dd if="$sd" of="$state/back" bs=1M count=1 skip=200 iflag=direct || return 1
	cmp "$state/pattern" "$state/back" || return 1
	echo "data written through NVMe/TCP read back through iSCSI"
	local nu ng ne su naa
	nu=$(grep -io 'uuid *: *[0-9a-f-]*' "$state/descs.txt" | awk '{print $NF}' | tr -d - | tr A-F a-f)
	ng=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nguid"])' "$state/idns.json" | tr A-F a-f)
	ne=$(python3 -c 'import json,sys; print("%016x" % int(json.load(open(sys.argv[1]))["eui64"], 16))' "$state/idns.json")
	sg_vpd -p di "$sd" >"$state/vpd83.txt" 2>&1
	cat "$state/vpd83.txt"
	su=$(grep -io '[0-9a-f]\{8\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{12\}' "$state/vpd83.txt" | head -1 | tr -d - | tr A-F a-f)
	naa=$(grep -io '0x6[0-9a-f]\{31\}' "$state/vpd83.txt" | head -1 | tr A-F a-f)
	echo "nvme uuid $nu nguid $ng eui64 $ne; scsi uuid $su naa $naa"
	iscsi_logout "$SLATE_IQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null
	[ -n "$nu" ] && [ "$nu" = "$su" ] && [ "$ng" = "$su" ] && [ "${naa: -16}" = "$ne" ]
}
check nvme-to-iscsi cross

# NVMe Copy (NVM Command Set 1.2 3.3.2) on two scratch file namespaces
# attached at runtime as NSID 5 and 6 (never the file system's): nvme-cli's
# `nvme copy` within NSID 5 (format 0h, with and without FUA; format 1h),
# each checked with cmp against what the host wrote (O_DIRECT reads: the
# copy bypasses the host's page cache).  Format 2h (a source namespace per
# entry) must be enabled by Host Behavior Support first, and this kernel
# refuses every data-out admin passthrough from user space (EACCES, even
# for root on a writable descriptor), so the host cannot enable it: the
# check here is that 2h is then refused with Invalid Field (nvme
# io-passthru, which also builds the entries this nvme-cli cannot); the
# cross-namespace copy itself is proven by tests/unit nvme_admin and
# core_copy.  Limits: 129 entries (MSRC 127; io-passthru, as nvme-cli stops
# at 128) and one range of 65536 blocks (MSSRL 65535) get Command Size
# Limit Exceeded and write nothing.
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }
copy_setup() {
	local i
	ctl namespace_create name=cp0 backend=file path="$state/cp0.img" size=64M block_size=512 &&
		ctl namespace_create name=cp1 backend=file path="$state/cp1.img" size=64M block_size=512 &&
		ctl nvmf_ns_attach nqn="$NQN" nsid=5 namespace=cp0 &&
		ctl nvmf_ns_attach nqn="$NQN" nsid=6 namespace=cp1 || return 1
	connect || return 1
	for i in $(seq 1 100); do dev_of 5 >/dev/null && dev_of 6 >/dev/null && break; sleep 0.1; done
	CP0=$(dev_of 5) && CP1=$(dev_of 6) && CTRL=/dev/$(ctrl_of) || return 1
	echo "copy namespaces $CP0 (nsid 5) $CP1 (nsid 6), controller $CTRL"
	nvme id-ctrl "$CTRL" | grep -E '^(oncs|ocfs)' || return 1
	nvme id-ns "$CP0" -n 5 | grep -E '^(mssrl|mcl|msrc)' || return 1
	head -c $((8 << 20)) /dev/urandom >"$state/cp-src"
	dd if="$state/cp-src" of="$CP0" bs=1M oflag=direct 2>/dev/null
}
check copy-setup copy_setup
# got DEV LBA BLOCKS -> those 512-byte blocks, read O_DIRECT in 1 MiB requests
got() {
	dd if="$1" bs=1M skip=$(($2 * 512)) count=$(($3 * 512)) \
		iflag=direct,skip_bytes,count_bytes 2>/dev/null
}
# src LBA BLOCKS -> the host's pattern at those blocks
src() { dd if="$state/cp-src" bs=512 skip="$1" count="$2" 2>/dev/null; }
copy_f0() { # blocks [0,2048) and [8192,12288) to 40000, in that order
	nvme copy "$CP0" -n 5 --sdlba=40000 --slbs=0,8192 --blocks=2047,4095 "$@" || return 1
	cmp <(src 0 2048; src 8192 4096) <(got "$CP0" 40000 6144)
}
check copy-format0 copy_f0
check copy-format0-fua copy_f0 --force-unit-access
copy_f1() { # 40-byte entries (PI fields, ignored without PI)
	nvme copy "$CP0" -n 5 --sdlba=60000 --slbs=100 --blocks=999 --format=1 || return 1
	cmp <(src 100 1000) <(got "$CP0" 60000 1000)
}
check copy-format1 copy_f1
# entries FORMAT SNSID:SLBA:NLB... -> Source Range entries (32 bytes each: format 0h/2h)
entries() {
	python3 - "$@" <<'PY'
import struct, sys
out = b""
for a in sys.argv[1:]:
    snsid, slba, nlb = (int(x) for x in a.split(":"))
    e = bytearray(32)
    struct.pack_into("<IIQH", e, 0, snsid, 0, slba, nlb - 1)
    out += e
sys.stdout.buffer.write(out)
PY
}
copy_f2_needs_enable() { # NSID 5 -> NSID 6 in format 2h, never enabled: Invalid Field
	local out
	entries 5:0:16 >"$state/cp-desc2.bin"
	out=$(nvme io-passthru "$CP1" -n 6 -o 0x19 --cdw10=500 --cdw12=$((2 << 8)) -l 32 -w \
		-i "$state/cp-desc2.bin" 2>&1)
	echo "format 2h without CDFE: $out"
	echo "$out" | grep -qi 'invalid field' || return 1
	cmp <(head -c 8192 /dev/zero) <(got "$CP1" 500 16)
}
check copy-format2-needs-enabling copy_f2_needs_enable
copy_limits() {
	local out
	entries $(for i in $(seq 0 128); do echo "5:$i:1"; done) >"$state/cp-desc129.bin"
	out=$(nvme io-passthru "$CP0" -n 5 -o 0x19 --cdw10=50000 --cdw12=128 -l $((129 * 32)) -w \
		-i "$state/cp-desc129.bin" 2>&1)
	echo "129 entries: $out"
	echo "$out" | grep -qi 'size limit' || return 1
	out=$(nvme copy "$CP0" -n 5 --sdlba=50000 --slbs=65536 --blocks=65535 2>&1)
	echo "65536 blocks: $out"
	echo "$out" | grep -qi 'size limit' || return 1
	# Nothing was written by the refused copies.
	cmp <(head -c $((200 * 512)) /dev/zero) <(got "$CP0" 50000 200)
}
check copy-limits copy_limits

# Format 2h across two namespaces from Linux.  The 6.12 host never sends Set
# Features Host Behavior Support (FID 16h) for user space: nvme-cli's
# set-feature and admin-passthru get EACCES (root, CAP_SYS_ADMIN, read-write
# descriptor), with or without data, and the kernel's nvme_setup_cmd trace
# shows nothing reaching the wire; Set Features FID 0Eh with data does go
# out.  So the subsystem enables 2h/3h itself (nvmf_subsystem_create
# copy_cross_namespace=true, README): the host then reads CDFE 0Ch in Get
# Features and copies NSID 1 -> NSID 2 with nvme io-passthru (this nvme-cli's
# `nvme copy` has --format but no source namespace IDs); data checked with cmp.
XNQN=${NQN}-xns
copy_xns() {
	local i c x0 x1 out
	ctl namespace_create name=cx0 backend=file path="$state/cx0.img" size=16M block_size=512 &&
		ctl namespace_create name=cx1 backend=file path="$state/cx1.img" size=16M block_size=512 &&
		ctl nvmf_subsystem_create nqn="$XNQN" copy_cross_namespace=true &&
		ctl nvmf_ns_attach nqn="$XNQN" nsid=1 namespace=cx0 &&
		ctl nvmf_ns_attach nqn="$XNQN" nsid=2 namespace=cx1 || return 1
	nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$XNQN" || return 1
	for i in $(seq 1 100); do
		NQN=$XNQN dev_of 1 >/dev/null && NQN=$XNQN dev_of 2 >/dev/null && break
		sleep 0.1
	done
	x0=$(NQN=$XNQN dev_of 1) && x1=$(NQN=$XNQN dev_of 2) && c=/dev/$(NQN=$XNQN ctrl_of) || return 1
	echo "cross-namespace subsystem: $x0 (nsid 1) $x1 (nsid 2), controller $c"
	{ printf '\0\0\0\0\014'; head -c 507 /dev/zero; } >"$state/hbs.bin"
	out=$(nvme admin-passthru "$c" -o 0x09 --cdw10=0x16 -l 512 -w -i "$state/hbs.bin" 2>&1)
	echo "Set Features Host Behavior Support from this host: $out"
	nvme admin-passthru "$c" -o 0x0a --cdw10=0x16 -l 512 -r -b >"$state/hbs.out" || return 1
	echo "CDFE: $(od -An -tx1 -j4 -N2 "$state/hbs.out")"
	[ "$(od -An -tx1 -j4 -N2 "$state/hbs.out" | tr -d ' ')" = 0c00 ] || return 1
	head -c $((1 << 20)) /dev/urandom >"$state/cx-src"
	dd if="$state/cx-src" of="$x0" bs=1M oflag=direct status=none || return 1
	# Two entries from NSID 1 (16 blocks at 0, 8 at 1000) to NSID 2 at 500.
	entries 1:0:16 1:1000:8 >"$state/cx-desc.bin"
	nvme io-passthru "$x1" -n 2 -o 0x19 --cdw10=500 --cdw12=$(((2 << 8) | 1)) -l 64 -w \
		-i "$state/cx-desc.bin" || return 1
	cmp <(dd if="$state/cx-src" bs=512 count=16 status=none
		dd if="$state/cx-src" bs=512 skip=1000 count=8 status=none) <(got "$x1" 500 24)
}
check copy-format2-across-namespaces copy_xns
nvme disconnect -n "$XNQN" >/dev/null 2>&1
ctl nvmf_subsystem_delete nqn="$XNQN" >/dev/null 2>&1
disconnect >/dev/null 2>&1

# RWF_ATOMIC through the kernel needs the limits on the disk itself: with
# nvme_core multipath off (no head node) nvme0n1 is the path device.  Then a
# runtime atomic_write_max change reaches the host (Namespace Attribute
# Changed, rescan) and the kernel's limit follows.
nvme_core_multipath() { # Y|N
	nvme disconnect-all >/dev/null 2>&1
	modprobe -r nvme_tcp nvme_fabrics nvmet_tcp nvmet nvme_core 2>/dev/null
	modprobe nvme_core multipath="$1" && modprobe nvme_tcp && modprobe nvmet_tcp
}
atomic_rw_nomp() {
	nvme_core_multipath N || return 1
	connect || return 1
	local d
	d=$(dev_of 1)
	echo "multipath off: $d unit_max=$(aqattr "${d##*/}" atomic_write_unit_max_bytes)"
	"$SLATE_BUILD/tests/atomic_rw" "$d" $((1 << 20)) 65536 || return 1
	# Twice the unit: the kernel refuses it (exit 2, EINVAL) before it is sent.
	"$SLATE_BUILD/tests/atomic_rw" "$d" $((2 << 20)) 131072
	[ $? = 2 ]
}
atomic_change() {
	local d i
	d=$(dev_of 1)
	"$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" namespace_set name=nv0 \
		atomic_write_max=32K >/dev/null || return 1
	for i in $(seq 1 100); do
		[ "$(aqattr "${d##*/}" atomic_write_unit_max_bytes)" = 32768 ] && break
		sleep 0.1
	done
	echo "after namespace_set atomic_write_max=32K: $(aqattr "${d##*/}" atomic_write_unit_max_bytes)"
	[ "$(aqattr "${d##*/}" atomic_write_unit_max_bytes)" = 32768 ] || return 1
	"$SLATE_BUILD/tests/atomic_rw" "$d" $((4 << 20)) 32768 || return 1
	"$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" namespace_set name=nv0 \
		atomic_write_max=64K >/dev/null
}
if [ $kernel_atomic = 1 ]; then
	check atomic-rwf-write atomic_rw_nomp
	check atomic-limit-change atomic_change
	disconnect >/dev/null 2>&1
	nvme_core_multipath Y
fi

# The reactor mode this run asked for (SLATE_REACTOR_POLL, tests/run-all.sh
# runs this group in polling mode) is the one slated ran in.
check reactor-poll slate_poll_verify
check daemon-alive slate_alive
rc=0
slate_stop || rc=$?
check clean-exit test "$rc" = 0
check sanitizer-clean slate_sanitizer_clean "$log"
echo "$slate_npass passed, $slate_nfail failed"
[ "$slate_nfail" -eq 0 ]
