#!/bin/bash
# tests/e2e/cross-parallel.sh — the e2e_cross parts in two linuxvm VMs at
# once: the namespace-state parts (10-65, 90) and the failing-media,
# streams, fault and security parts (70-89).  Each VM boots its own kernel and
# its own slated, so the halves are independent; the guests spend much of
# their time waiting on the hosts' timers and I/O, so two of them share the
# 2-core machine well and the group takes little more than its longer half.
# Prints both halves' result lines (state half first) and fails when either
# failed.
set -u
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/slate-cross-par.XXXXXX)
trap 'rm -rf "$out"' EXIT
CROSS_NAME=e2e-cross CROSS_PARTS='[1-69]*' tests/e2e/cross-linux.sh >"$out/state" 2>&1 &
a=$!
CROSS_NAME=e2e-cross-media CROSS_PARTS='[78]*' tests/e2e/cross-linux.sh >"$out/media" 2>&1 &
b=$!
wait "$a"
ra=$?
wait "$b"
rb=$?
cat "$out/state" "$out/media"
[ "$ra" = 0 ] && [ "$rb" = 0 ]
