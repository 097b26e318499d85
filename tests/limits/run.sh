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
#  - 2000 idle connections cost slated < 10 kB each (RSS);
#  - a per-host connection cap set by a live reload closes connections
#    beyond it at accept and admits new ones once others close;
#  - at the open-file limit (a second slated with 128 descriptors) no core
#    spins and a client connects once descriptors are freed;
#  - NOP-In pings (nop.py) and the RPC idle timeout (rpc_idle.py), turned on
#    by a live reload; daemon_status counts the pings; an NVMe host that
#    stops answering loses every queue of its controller at KATO expiry;
#  - namespace files and config_save targets only in the state dir or
#    options.allowed_dirs (symlink and ".." escapes refused, block devices
#    refused without allow_block_devices);
#  - the state dir is 0700 (an existing 0755 one is tightened), a disk's data
#    and metadata files 0600.
# Then chap.sh (iSCSI CHAP) and acl.sh (initiator ACLs, LUN masking,
# SendTargets filtering, per-initiator CHAP) against daemons of their own.
# slated must be alive and its log free of sanitizer reports after each.
# Then chap.sh (iSCSI CHAP) and tls.sh (NVMe/TCP TLS 1.3 PSK), each with
# its own slated.
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

# 4. Idle connections cost little: 1000 of each kind, silent (before the login timeout).
out=$(python3 - "$pid" "$SLATE_PORT" "$SLATE_NVME_PORT" <<'PY'
import resource, socket, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
pid, ports, n = int(sys.argv[1]), (int(sys.argv[2]), int(sys.argv[3])), 1000
def rss():
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS"):
            return int(l.split()[1])
r0 = rss()
socks = [socket.create_connection(("127.0.0.1", ports[i % 2])) for i in range(2 * n)]
time.sleep(0.5)
r1 = rss()
print("%.1f" % ((r1 - r0) / (2.0 * n)))
PY
)
if [ -z "$out" ]; then
	slate_result FAIL limits.idle_memory "" "could not measure"
elif awk -v k="$out" 'BEGIN { exit !(k < 10) }'; then
	echo "limits.idle_memory: $out kB per idle connection" >"$logdir/idle_memory.log"
	slate_result PASS limits.idle_memory
else
	slate_result FAIL limits.idle_memory "" "$out kB per idle connection (5,000 must cost < 50 MB: < 10 kB each)"
fi
check_alive limits.idle_memory.alive && slate_result PASS limits.idle_memory.alive

# 5. Connection caps, changed live by a reload: 5 from one host, the 6th is closed at accept;
#    once some close, new ones are admitted again.
sed -i 's/"options": {/"options": {"max_connections_per_host": 5, /' "$state/slate.json"
if ! "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" config_reload >"$logdir/reload.out" 2>&1; then
	slate_result FAIL limits.caps "$logdir/reload.out" "config_reload failed"
else
	out=$(python3 - "$SLATE_PORT" "$SLATE_NVME_PORT" <<'PY'
import socket, sys, time
iport, nport = int(sys.argv[1]), int(sys.argv[2])
def closed_at_once(s):
    s.settimeout(1.5)  # a refusal closes at once; the login timeout (2 s) must not count
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
keep = [socket.create_connection(("127.0.0.1", iport if i % 2 else nport)) for i in range(5)]
time.sleep(0.3)
extra = [socket.create_connection(("127.0.0.1", p)) for p in (iport, nport)]
bad = [i for i, s in enumerate(extra) if not closed_at_once(s)]
if bad:
    print("FAIL a connection beyond the per-host cap of 5 stayed open (%s)" % ("iSCSI" if 0 in bad else "NVMe/TCP"))
    sys.exit()
for s in keep[:2]:
    s.close()
ok = False
for attempt in range(20):  # the target notices the closes on its own time
    time.sleep(0.25)
    again = socket.create_connection(("127.0.0.1", iport))
    if not closed_at_once(again):
        ok = True
        break
if not ok:
    print("FAIL a connection was still refused 5 s after others closed")
    sys.exit()
print("PASS")
PY
)
	if [ "$out" = PASS ] && grep -q "connection refused: 5 connections open from this host" "$daemon_log"; then
		slate_result PASS limits.caps
	elif [ "$out" = PASS ]; then
		slate_result FAIL limits.caps "$daemon_log" "no log line for the refused connections"
	else
		slate_result FAIL limits.caps "$daemon_log" "${out#FAIL }"
	fi
fi
check_alive limits.caps.alive && slate_result PASS limits.caps.alive

# 5b. NOP-In pings and the RPC idle timeout, both turned on by a live reload
#     (the sessions log in after it): an answering session stays, a silent
#     one is closed after nop_timeout_ms; idle RPC clients go, slatectl gets in.
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }
sed -i 's/"max_connections_per_host": 5, //; s/"options": {/"options": {"nop_interval_ms": 1000, "nop_timeout_ms": 2000, "rpc_idle_timeout_ms": 3000, /' "$state/slate.json"
if ! ctl config_reload >"$logdir/reload-nop.out" 2>&1; then
	slate_result FAIL limits.nop "$logdir/reload-nop.out" "config_reload failed"
else
	nop0=$(ctl --json daemon_status | python3 -c 'import json,sys; print(json.load(sys.stdin)["iscsi_nop"]["timeouts"])')
	(cd "$here" && timeout 60 python3 nop.py "$SLATE_PORT" "$SLATE_IQN" 1000 2000) >"$logdir/nop.log" 2>&1
	grep -E '^(PASS|FAIL) ' "$logdir/nop.log" || slate_result FAIL limits.nop "$logdir/nop.log" "nop.py reported nothing"
	nop=$(ctl --json daemon_status | python3 -c 'import json,sys; n=json.load(sys.stdin)["iscsi_nop"]; print(n["sent"], n["answered"], n["timeouts"])')
	set -- $nop
	if [ "${1:-0}" -ge 3 ] && [ "${2:-0}" -ge 2 ] && [ "${3:-0}" -eq $((nop0 + 1)) ] &&
		grep -q 'connection closed (no answer to a NOP-In in 2000 ms)' "$daemon_log"; then
		slate_result PASS limits.nop_status
	else
		slate_result FAIL limits.nop_status "$daemon_log" "daemon_status iscsi_nop sent/answered/timeouts: $nop (want >= 3, >= 2, $((nop0 + 1))) or no log line"
	fi
	timeout 60 python3 "$here/rpc_idle.py" "$state/run/slated.sock" "$SLATE_BUILD/slatectl" 3000 >"$logdir/rpc_idle.log" 2>&1
	grep -E '^(PASS|FAIL) ' "$logdir/rpc_idle.log" || slate_result FAIL limits.rpc "$logdir/rpc_idle.log" "rpc_idle.py reported nothing"
fi
check_alive limits.nop.alive && slate_result PASS limits.nop.alive

# 5b'. NVMe keep-alive: a host (slate-perf, KATO 1 s, an admin and 2 I/O queues) that stops
#      (SIGSTOP) loses its controller: every one of its queues is closed, none before KATO.
nvconns() { ctl --json daemon_status | python3 -c 'import json,sys; print(json.load(sys.stdin)["connections"]["nvme_tcp"])'; }
"$SLATE_BUILD/tools/slate-perf/slate-perf" -t nvme-tcp -p "$SLATE_NVME_PORT" -n nqn.2026-12.io.slate:limits \
	-Q 2 -q 1 --kato 1000 -d 60 >"$logdir/kato-perf.log" 2>&1 &
kpid=$!
n=
for _ in $(seq 1 50); do
	n=$(nvconns)
	[ "$n" = 3 ] && break
	sleep 0.2
done
kill -STOP "$kpid" 2>/dev/null
t_stop=$(date +%s%N)
ka0=$(grep -c 'keep-alive timeout (1000 ms)' "$daemon_log")
gone=
for _ in $(seq 1 60); do
	if [ "$(grep -c 'keep-alive timeout (1000 ms)' "$daemon_log")" -gt "$ka0" ] && [ "$(nvconns)" = 0 ]; then
		gone=$((($(date +%s%N) - t_stop) / 1000000))
		break
	fi
	sleep 0.25
done
kill -9 "$kpid" 2>/dev/null
wait "$kpid" 2>/dev/null
closed=$(grep -A10 'keep-alive timeout (1000 ms)' "$daemon_log" | grep -c 'qid [012] closed: controller teardown')
if [ "$n" != 3 ]; then
	slate_result FAIL limits.kato_queues "$logdir/kato-perf.log" "slate-perf did not connect 3 queues ($n)"
elif [ -z "$gone" ]; then
	slate_result FAIL limits.kato_queues "$daemon_log" "queues of a stopped host still open 15 s after KATO 1 s"
elif [ "$gone" -lt 1000 ] || [ "$closed" -lt 3 ]; then
	slate_result FAIL limits.kato_queues "$daemon_log" "closed after $gone ms (KATO 1000) or not every queue by the teardown ($closed of 3)"
else
	echo "queues closed $gone ms after the host stopped (KATO 1000 ms + 2000 ms grace)" >"$logdir/kato.log"
	slate_result PASS limits.kato_queues
fi

# 5c. Where namespace files and saved configs may go: the state dir, options.allowed_dirs;
#     symbolic links and ".." resolved first; block devices only with allow_block_devices.
out=$state/outside
mkdir -p "$out"
ln -sfn "$out" "$state/run/escape"
paths_fail=
refused() { # NAME ARGS... -> the call must fail with a message naming the rule
	local msg
	if msg=$(ctl "${@:2}" 2>&1); then
		paths_fail="$paths_fail; $1 was accepted"
		ctl namespace_delete name="${3#name=}" >/dev/null 2>&1
	elif ! echo "$msg" | grep -q "refused"; then
		paths_fail="$paths_fail; $1: unclear error: $msg"
	fi
}
ctl namespace_create name=pin backend=file path="$state/run/pin.img" size=1M >/dev/null 2>&1 ||
	paths_fail="$paths_fail; a file in the state dir was refused"
refused outside namespace_create name=pout backend=file path="$out/pout.img" size=1M
refused symlink namespace_create name=plink backend=file path="$state/run/escape/plink.img" size=1M
refused dotdot namespace_create name=pdot backend=file path="$state/run/../outside/pdot.img" size=1M
refused save_outside config_save path="$out/saved.json"
[ -e "$out/pout.img" ] || [ -e "$out/plink.img" ] || [ -e "$out/pdot.img" ] || [ -e "$out/saved.json" ] &&
	paths_fail="$paths_fail; a file was created outside"
ctl config_save path="$state/run/saved.json" >/dev/null 2>&1 || paths_fail="$paths_fail; config_save into the state dir failed"
blk=$(find /dev -maxdepth 1 -type b 2>/dev/null | head -1)
if [ -n "$blk" ]; then
	refused blockdev namespace_create name=pblk backend=file path="$blk"
	ln -sfn "$blk" "$state/run/blk-link"
	refused blockdev_link namespace_create name=pblk2 backend=file path="$state/run/blk-link"
fi
# allowed_dirs by a live reload: now the outside directory is fine
sed -i "s|\"options\": {|\"options\": {\"allowed_dirs\": [\"$out\"], |" "$state/slate.json"
if ! ctl config_reload >"$logdir/reload-paths.out" 2>&1; then
	paths_fail="$paths_fail; config_reload with allowed_dirs failed"
elif ! ctl namespace_create name=pout backend=file path="$out/pout.img" size=1M >"$logdir/paths.out" 2>&1; then
	paths_fail="$paths_fail; a file in allowed_dirs was refused: $(cat "$logdir/paths.out")"
fi
refused blockdev_after_reload namespace_create name=pblk3 backend=file path="${blk:-/dev/null}"
if [ -z "$paths_fail" ]; then
	slate_result PASS limits.paths
else
	slate_result FAIL limits.paths "$daemon_log" "${paths_fail#; }"
fi
check_alive limits.paths.alive && slate_result PASS limits.paths.alive

# 5d. config_save writes the running options back: a saved config restarts or
#     reloads with the same limits and allowed_dirs, so the namespace in the
#     allowed directory is still accepted when the saved file is reloaded.
saved_fail=
ctl config_save path="$state/run/saved2.json" >/dev/null 2>&1 || saved_fail="config_save failed"
if [ -z "$saved_fail" ] && ! python3 - "$state/run/saved2.json" "$out" "$LOGIN_MS" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
o = d.get("options", {})
ok = o.get("allowed_dirs") == [sys.argv[2]] and o.get("login_timeout_ms") == int(sys.argv[3])
ok = ok and any(e["method"] == "namespace_create" and e["params"].get("name") == "pout" for e in d["config"])
sys.exit(0 if ok else 1)
PY
	saved_fail="the saved config lacks the options (allowed_dirs, login_timeout_ms) or pout: $(head -c 300 "$state/run/saved2.json")"
fi
if [ -z "$saved_fail" ] && ! ctl config_reload path="$state/run/saved2.json" >"$logdir/reload-saved.out" 2>&1; then
	saved_fail="reloading the saved config failed: $(tail -3 "$logdir/reload-saved.out")"
fi
if [ -z "$saved_fail" ] && ! ctl namespace_list 2>/dev/null | grep -q '^pout '; then
	saved_fail="pout is gone after reloading the saved config"
fi
if [ -z "$saved_fail" ]; then
	slate_result PASS limits.config_save_options
else
	slate_result FAIL limits.config_save_options "$daemon_log" "$saved_fail"
fi

# 6. Safe state: owner-only files.
modes=$(stat -c '%a' "$state/run" "$state/run/limf.img" "$state/run/limf.meta.json" 2>&1 | tr '\n' ' ')
if [ "$modes" = "700 600 600 " ]; then
	slate_result PASS limits.file_modes
else
	slate_result FAIL limits.file_modes "$daemon_log" "state dir, data, metadata modes: $modes (want 700 600 600)"
fi

# 7. At the descriptor limit no core spins, and a client gets in once descriptors free up.
#    A second slated whose hard open-file limit is 128; 160 connections exhaust it.
slate_stop >/dev/null 2>&1
fdlog=$logdir/fdlimit.log
: >"$fdlog"
sed -i 's/"max_connections_per_host": 5, //' "$state/slate.json"
(
	ulimit -Hn 128 -Sn 128
	exec "$SLATE_BUILD/slated" --config "$state/slate.json" --state-dir "$state/run2" >>"$fdlog" 2>&1
) &
fdpid=$!
for _ in $(seq 1 100); do grep -q ' ready: ' "$fdlog" && break; sleep 0.1; done
slate_read_ports "$fdlog" 1
if [ -z "${SLATE_PORT:-}" ]; then
	slate_result FAIL limits.fd_exhausted "$fdlog" "second slated did not start"
else
	out=$(python3 - "$fdpid" "$SLATE_PORT" <<'PY'
import os, socket, sys, time
pid, port = int(sys.argv[1]), int(sys.argv[2])
hz = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz
socks = []
for i in range(160):
    try:
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError:
        break
time.sleep(0.5)
c0, t0 = cpu(), time.monotonic()
time.sleep(3)
busy = (cpu() - c0) / (time.monotonic() - t0)
for s in socks:
    s.close()
ok = False
for attempt in range(20):  # the listener retries after its pause
    time.sleep(0.5)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"\x3f" + b"\xff" * 47)  # any answer (a Reject, or a close after it) means accepted
        s.settimeout(3)
        try:
            s.recv(48)
        except OSError:
            pass
        ok = True
        break
    except OSError:
        pass
print("%.2f %d %s" % (busy, len(socks), "in" if ok else "out"))
PY
)
	busy=${out%% *}
	rest=${out#* }
	if [ -z "$out" ]; then
		slate_result FAIL limits.fd_exhausted "$fdlog" "could not measure"
	elif ! grep -q 'Too many open files' "$fdlog"; then
		slate_result FAIL limits.fd_exhausted "$fdlog" "the descriptor limit was never reached (${rest% *} connections)"
	elif awk -v b="$busy" 'BEGIN { exit !(b > 0.5) }'; then
		slate_result FAIL limits.fd_exhausted "$fdlog" "slated used $busy of a core while out of descriptors (a spinning accept)"
	elif [ "${rest#* }" != in ]; then
		slate_result FAIL limits.fd_exhausted "$fdlog" "no client got in after descriptors were freed"
	else
		echo "cpu $busy of a core while out of descriptors" >"$logdir/fd_exhausted.log"
		slate_result PASS limits.fd_exhausted
	fi
fi
kill "$fdpid" 2>/dev/null
wait "$fdpid" 2>/dev/null
if grep -q 'ERROR: AddressSanitizer\|runtime error:' "$fdlog"; then
	slate_result FAIL limits.fd_exhausted.clean "$fdlog" "sanitizer report"
fi
bash "$here/chap.sh"
bash "$here/acl.sh"
bash "$here/tls.sh"
