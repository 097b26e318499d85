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
slate_vm_run e2e 1140 tests/e2e/vm-iscsi.sh
