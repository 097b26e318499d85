#!/bin/bash
# tests/limits/run.sh — what a careless or hostile peer can hold (issue 11).
#
# Starts slated (build-asan) with short limits (options login_timeout_ms,
# idle_timeout_ms), an iSCSI portal and an NVMe/TCP listener, then:
#  - idle.py: silent TCP connections, a half-sent BHS, a login stopped midway,
#    an ICReq without a Connect, idle iSCSI and NVMe discovery sessions are
#    each closed by their timeout (not before), and a logged-in normal iSCSI
#    session is left alone;
#  - a garbage flood (many connections each sending an invalid PDU) leaves
#    a bounded number of warnings in the log, with the summary line;
#  - the open-file soft limit was raised to the hard limit at start;
#  - the state dir is 0700 (an existing 0755 one is tightened), a disk's data
#    and metadata files 0600.
# slated must be alive and its log free of sanitizer reports after each.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

LOGIN_MS=${LIMITS_LOGIN_MS:-2000}
IDLE_MS=${LIMITS_IDLE_MS:-3000}
logdir=$SLATE_LOGDIR/limits
mkdir -p "$logdir"
state=$(mktemp -d /tmp/slate-limits.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"

cat >"$state/slate.json" <<JSON
{"options": {"login_timeout_ms": $LOGIN_MS, "idle_timeout_ms": $IDLE_MS},
 "config": [
  {"method": "namespace_create", "params": {"name": "lim0", "backend": "mem", "size": "16M", "block_size": 512}},
  {"method": "namespace_create", "params": {"name": "limf", "backend": "file", "size": "4M", "block_size": 512}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "lim0"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "nqn.2026-12.io.slate:limits"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "nqn.2026-12.io.slate:limits", "nsid": 1, "namespace": "lim0"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
# A low soft limit under a higher hard one, so the raise is visible.
hard=$(ulimit -Hn)
soft=1024
[ "$hard" != unlimited ] && [ "$hard" -le "$soft" ] && soft=$((hard / 2))
ulimit -Sn "$soft"
mkdir -p "$state/run" && chmod 0755 "$state/run" # an old state dir: made owner-only at start
if ! slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" ||
	[ -z "$SLATE_PORT" ] || [ -z "$SLATE_NVME_PORT" ]; then
	slate_result FAIL limits.start "$daemon_log" "slated did not start"
	exit 1
fi
pid=$SLATE_PID

check_alive() { # NAME
	if ! kill -0 "$pid" 2>/dev/null; then
		slate_result FAIL "$1" "$daemon_log" "slated died"
		return 1
	elif ! slate_sanitizer_clean "$daemon_log"; then
		slate_result FAIL "$1" "$daemon_log" "sanitizer report"
		return 1
	fi
}

# 1. Timeouts.
out=$(timeout 120 python3 "$here/idle.py" "$SLATE_PORT" "$SLATE_NVME_PORT" "$SLATE_IQN" "$LOGIN_MS" "$IDLE_MS" 2>&1)
echo "$out" >"$logdir/idle.log"
echo "$out" | grep -E '^(PASS|FAIL) '
echo "$out" | grep -qE '^(PASS|FAIL) ' || slate_result FAIL limits.idle "$logdir/idle.log" "idle.py reported nothing"
check_alive limits.idle.alive && slate_result PASS limits.idle.alive

# 2. A garbage flood logs a bounded number of warnings.
before=$(grep -c 'protocol violation' "$daemon_log")
t0=$(date +%s)
python3 - "$SLATE_PORT" "$SLATE_NVME_PORT" <<'PY'
import socket, sys
for i in range(300):
    port = int(sys.argv[1 + i % 2])
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        # iSCSI: an undefined opcode; NVMe/TCP: an undefined PDU type
        s.sendall((b"\x3f" if i % 2 == 0 else b"\x7f\x00\x08\x00\x08\x00\x00\x00") + b"\xff" * 47)
        s.settimeout(2)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    except OSError:
        pass
PY
sleep 1.2
# one more bad connection opens a new window, which writes the summary line
python3 -c "import socket,sys; s=socket.create_connection(('127.0.0.1',$SLATE_PORT)); s.sendall(b'\x3f'+b'\xff'*47); s.settimeout(2)
try: s.recv(64)
except OSError: pass"
secs=$(($(date +%s) - t0 + 1))
after=$(grep -c 'protocol violation' "$daemon_log")
lines=$((after - before))
bound=$((secs * 2 * 10 + 20)) # two limiters (iSCSI, NVMe/TCP), 10 a second each, plus slack
if [ "$lines" -gt "$bound" ]; then
	slate_result FAIL limits.flood_log "$daemon_log" "$lines warning lines for 300 bad connections in ${secs}s (bound $bound)"
elif ! grep -q 'similar lines suppressed' "$daemon_log"; then
	slate_result FAIL limits.flood_log "$daemon_log" "no 'similar lines suppressed' summary after the flood ($lines lines)"
elif check_alive limits.flood_log; then
	slate_result PASS limits.flood_log
fi

# 3. The open-file limit.
nofile=$(awk '/^Max open files/ {print $4}' "/proc/$pid/limits")
if [ "$hard" = unlimited ] || [ "$nofile" = "$hard" ]; then
	if [ "$hard" != "$soft" ] && ! grep -q 'open-file limit raised' "$daemon_log"; then
		slate_result FAIL limits.nofile "$daemon_log" "soft limit $nofile but no log line about raising it"
	else
		slate_result PASS limits.nofile
	fi
else
	slate_result FAIL limits.nofile "/proc/$pid/limits" "soft open-file limit $nofile, hard $hard"
fi

# 4. Safe state: owner-only files.
modes=$(stat -c '%a' "$state/run" "$state/run/limf.img" "$state/run/limf.meta.json" 2>&1 | tr '\n' ' ')
if [ "$modes" = "700 600 600 " ]; then
	slate_result PASS limits.file_modes
else
	slate_result FAIL limits.file_modes "$daemon_log" "state dir, data, metadata modes: $modes (want 700 600 600)"
fi
