#!/bin/bash
# tests/e2e/cross-linux.sh — one namespace, both transports, the Linux kernel
# as both hosts (DESIGN.md "Namespace state and events").
#
# On the host: boots ../shared/tools/linuxvm and runs this same script
# inside with --inside.  Inside the VM: slated exports one file namespace
# "shared" as LUN 0 of iSCSI target $XIQN and as NSID 1 of NVMe subsystem
# $XNQN; the kernel's NVMe/TCP host connects (nvme-cli) and open-iscsi logs
# in, so one namespace is seen by two hosts over two protocols at once.
# Then every part in tests/e2e/cross.d/*.sh runs, in name order, sourced
# into this shell: each part changes the namespace's state through one
# protocol (or slatectl) and checks what the other host sees, with
# `check NAME CMD...` lines (one PASS/FAIL each).  Parts may use:
#   $NVDEV  the namespace's block device on the NVMe host (/dev/nvmeXnY)
#   $NVCTRL its controller (/dev/nvmeX)
#   $SD     the iSCSI disk (/dev/sdX)
#   $XNQN $XIQN $PORT $ISCSI_PORT $state $log
#   ctl METHOD [k=v...]  slatectl against this slated
#   nv_reconnect / sd_relogin  when a part had to drop a host
#   wait_for SECS CMD...  poll CMD until it succeeds
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

# CROSS_PARTS=PATTERN (shell patterns of part names, separated by commas —
# the command line reaches the VM word-split —, e.g. '90-*' or
# '6[05]-*,90-reload') runs only those parts (a part that uses another's helpers
# needs that one too); CROSS_NAME names the run's log directory and
# CROSS_VM_TIMEOUT its VM's limit (make test runs the parts in two VMs).
if [ "${1:-}" != --inside ]; then
	# (a pattern could be expanded on its way into the VM: "all" is literal)
	slate_vm_run "${CROSS_NAME:-e2e-cross}" "${CROSS_VM_TIMEOUT:-1200}" tests/e2e/cross-linux.sh --inside "${CROSS_PARTS:-all}"
	exit
fi
parts=${2:-all}

# ---------------------------------------------------------------- inside the VM
. ../shared/tools/linuxvm/peers.sh # iscsi_login / iscsi_logout
XNQN=nqn.2026-12.io.slate:cross
XIQN=iqn.2026-12.io.slate:cross
PORT=4420
ISCSI_PORT=3260
logdir=$SLATE_LOGDIR
mkdir -p "$logdir"
log=$logdir/slated.log
: >"$log"
state=/tmp/slate-e2e-cross
rm -rf "$state"
mkdir -p "$state"

check() { slate_check e2e-cross "$@"; } # check NAME CMD... -> one PASS/FAIL line

wait_for() { # wait_for SECS CMD... -> 0 once CMD succeeds
	local secs=$1 i
	shift
	for i in $(seq 1 $((secs * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@"
}
# wait_until SECS CMD... -> like wait_for, but SECS of wall clock: wait_for
# counts SECS*10 tries 0.1 s apart, and a CMD that itself takes a second
# under TCG stretches it tenfold (a teardown's "wait_for 20" once ran 287 s).
wait_until() {
	local end=$((SECONDS + $1))
	shift
	while [ "$SECONDS" -lt "$end" ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	"$@"
}

cat >"$state/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"]}, "config": [
  {"method": "namespace_create", "params": {"name": "shared", "backend": "file", "path": "$state/shared.img", "size": "256M", "block_size": 512, "sanitize_rate_mibps": 32}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$XNQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$XNQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$XNQN", "nsid": 1, "namespace": "shared"}},
  {"method": "iscsi_target_create", "params": {"name": "$XIQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$XIQN", "lun": 0, "namespace": "shared"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": $ISCSI_PORT}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $PORT}}
]}
JSON

ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }

nv_dev() {
	local d n
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$XNQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = 1 ] || continue
			n=${n##*/}
			[ -b "/dev/$n" ] && { echo "/dev/$n"; return 0; }
		done
	done
	return 1
}
nv_connect() {
	nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$XNQN" || return 1
	wait_for 10 nv_dev || return 1
	NVDEV=$(nv_dev)
	NVCTRL=/dev/$(basename "$(grep -l "^$XNQN\$" /sys/class/nvme/nvme*/subsysnqn | head -1 | xargs dirname)")
	echo "NVMe: $NVDEV on $NVCTRL"
}
nv_reconnect() { nvme disconnect -n "$XNQN" >/dev/null 2>&1; nv_connect; }
sd_login() {
	SD=$(iscsi_login "$XIQN" 127.0.0.1 "$ISCSI_PORT") || return 1
	echo "iSCSI: $SD"
}
sd_relogin() { iscsi_logout "$XIQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1; sd_login; }
# gw2_start RUNDIR CONFIG PORT LOG -> (re)start a second slated (another
# gateway, parts 93 and 94) in RUNDIR; its pid in gw2_pid, SLATE_PID untouched.
gw2_start() {
	local keep=$SLATE_PID rc
	SLATE_PID=
	slate_start "$@"
	rc=$?
	gw2_pid=$SLATE_PID
	SLATE_PID=$keep
	return $rc
}

modprobe nvme-tcp 2>/dev/null || true
check start slate_start "$state/run" "$state/slate.json" "$PORT" "$log"
trap 'nvme disconnect-all >/dev/null 2>&1; iscsi_logout "$XIQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1; slate_stop >/dev/null 2>&1' EXIT
NVDEV= NVCTRL= SD=
nv_connect >"$logdir/connect.log" 2>&1 && sd_login >>"$logdir/connect.log" 2>&1
check both-hosts-connected test -n "$NVDEV" -a -n "$SD"
cat "$logdir/connect.log"

part_wanted() { # NAME -> true when it matches one of the comma-separated patterns in $parts
	local p ps
	IFS=, read -ra ps <<<"$parts" # (no glob expansion against the working directory)
	for p in "${ps[@]}"; do
		# shellcheck disable=SC2053
		[[ $1 == $p ]] && return 0
	done
	return 1
}
for part in tests/e2e/cross.d/*.sh; do
	[ -f "$part" ] || continue
	[ "$parts" = all ] || part_wanted "$(basename "$part" .sh)" || continue
	echo "--- $part (at ${SECONDS}s)"
	# A part that does not parse would be skipped by "." without a word.
	if ! bash -n "$part" 2>"$logdir/parse.err"; then
		slate_result FAIL "e2e-cross.$(basename "$part" .sh).parses" "$logdir/parse.err"
		slate_nfail=$((slate_nfail + 1))
		continue
	fi
	# shellcheck disable=SC1090
	. "$part"
done
echo "--- parts done (at ${SECONDS}s)"

check daemon-alive slate_alive
rc=0
nvme disconnect-all >/dev/null 2>&1
iscsi_logout "$XIQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
slate_stop || rc=$?
check clean-exit test "$rc" = 0
check sanitizer-clean slate_sanitizer_clean "$log"
echo "$slate_npass passed, $slate_nfail failed"
[ "$slate_nfail" -eq 0 ]
