#!/bin/bash
# tests/robust/faults.sh — fault injection against a live slated (no VM).
#
# Starts slated (build-asan) with ONE reactor (-m 1) and a mem namespace
# exported over iSCSI and NVMe/TCP, then runs tests/robust/faults.py: RPC
# validation, every-Nth / count / seeded-fraction / LBA-range rules with the
# status each protocol must show, latency that does not block the reactor,
# connection drops after N commands with the host coming back.  Afterwards
# slated must be alive, stop cleanly and have no sanitizer report.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/robust-faults
mkdir -p "$logdir"
state=$(mktemp -d /tmp/slate-robust-faults.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"
NQN=nqn.2026-12.io.slate:faults
cat >"$state/slate.json" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "flt0", "backend": "mem", "size": "16M", "block_size": 512}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "flt0"}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$NQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "flt0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
if ! slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" -m 1 || [ -z "$SLATE_NVME_PORT" ]; then
	slate_result FAIL faults.start "$daemon_log" "slated did not start"
	exit 1
fi
fail=0
timeout -k 5 300 python3 "$here/faults.py" "$state/run/slated.sock" "$SLATE_PORT" "$SLATE_IQN" \
	"$SLATE_NVME_PORT" "$NQN" flt0 | tee "$logdir/faults.log"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
	grep -q '^FAIL' "$logdir/faults.log" || slate_result FAIL faults.run "$logdir/faults.log" "faults.py exit $rc"
	fail=1
fi
if ! slate_alive; then
	slate_result FAIL faults.daemon-alive "$daemon_log" "slated died"
	exit 1
fi
slate_stop
rc=$?
if [ "$rc" != 0 ] || ! slate_sanitizer_clean "$daemon_log"; then
	slate_result FAIL faults.clean-shutdown "$daemon_log" "exit status $rc"
	fail=1
else
	slate_result PASS faults.clean-shutdown
fi
exit $fail
