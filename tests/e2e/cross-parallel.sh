#!/bin/bash
# tests/e2e/cross-parallel.sh — the e2e_cross parts in two linuxvm VMs at
# once: the namespace-state parts (10-65, 90-pi, 91-94) and the
# failing-media, streams, fault and security parts (70-89) with 90-reload.
# Each VM boots its own kernel and its own slated, so the halves are
# independent; together the two guests keep the 2-core machine busy (a
# third would only share the same cores), and the group takes its longer
# half: the halves should end together.
# Prints both halves' result lines (state half first) and fails when either
# failed.
set -u
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/slate-cross-par.XXXXXX)
trap 'rm -rf "$out"' EXIT
# 90-reload (26 s) runs in the media half: at 2e801bb the state half ran
# 652 s and the media half 611 s, the last 40 s of them one VM alone on a
# half idle machine.
CROSS_NAME=e2e-cross CROSS_PARTS='[1-6]*,90-pi-*,9[1-9]-*' tests/e2e/cross-linux.sh >"$out/state" 2>&1 &
a=$!
CROSS_NAME=e2e-cross-media CROSS_PARTS='[78]*,90-reload' tests/e2e/cross-linux.sh >"$out/media" 2>&1 &
b=$!
wait "$a"
ra=$?
wait "$b"
rb=$?
cat "$out/state" "$out/media"
[ "$ra" = 0 ] && [ "$rb" = 0 ]
