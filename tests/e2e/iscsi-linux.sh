#!/bin/bash
# tests/e2e/iscsi-linux.sh — the Linux kernel as the iSCSI host (DESIGN.md "Tests").
#
# Boots ../shared/tools/linuxvm (the host's / read-only, this repo shared
# read-write) and runs tests/e2e/vm-iscsi.sh inside: slated, iscsid,
# sendtargets discovery and login, sg3_utils checks of what we claim, ext4 +
# files with checksums, fio with crc32c verification, a restart of slated
# and the checksums again.  Each step prints one PASS/FAIL line.  If the VM
# cannot boot, that is a failure (e2e.vm), never a skip.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
logdir=$SLATE_LOGDIR/e2e
mkdir -p "$logdir"
vm=${LINUXVM:-../shared/tools/linuxvm/linuxvm}
if [ ! -x "$vm" ]; then
	slate_result FAIL e2e.vm "" "linuxvm not found at $vm"
	exit 1
fi
out=$logdir/vm.stdout
err=$logdir/vm.stderr
# SLATE_BUILD is an absolute path on the host, the same path inside the VM.
"$vm" --timeout "${E2E_TIMEOUT:-900}" --env "SLATE_BUILD=$SLATE_BUILD" \
	--env "SLATE_LOGDIR=$logdir" -- tests/e2e/vm-iscsi.sh >"$out" 2>"$err"
rc=$?
grep -E '^(PASS|FAIL|SKIP) |^    \| ' "$out"
n=$(grep -cE '^(PASS|FAIL|SKIP) ' "$out")
case $rc in
0) ;;
124) slate_result FAIL e2e.vm "$err" "linuxvm timed out" ;;
125) slate_result FAIL e2e.vm "$err" "the VM failed to boot or run" ;;
*)
	if [ "$n" = 0 ] || ! grep -q '^FAIL ' "$out"; then
		slate_result FAIL e2e.vm "$err" "vm-iscsi.sh exit status $rc"
	fi
	;;
esac
[ "$rc" = 0 ]
