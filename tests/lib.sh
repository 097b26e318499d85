# tests/lib.sh — shared shell helpers for Slate's test scripts (sourced, not run).
#
# Starts and stops slated with a throw-away state dir and a generated JSON
# config (a replayable list of RPC calls, see src/mgmt/mgmt.h and DESIGN.md
# "Configuration is a table"); finds binaries.  slated listens on port 0 (the
# kernel picks a free port) and slate_start reads the ports it got from its
# log, so no test races another program for a port.  Everything here is
# plain bash so it also runs inside linuxvm.
#
# Variables a caller may set before sourcing:
#   SLATE_BUILD   build dir holding slated (default build-asan)
#   SLATE_LOGDIR  where logs go (default $SLATE_BUILD/test-logs)
#   SLATED_EXTRA  extra arguments for slated
#   SLATE_REACTOR_POLL  adaptive | always: slate_start sets the config's
#                 options.reactor_poll to it (tests/run-all.sh runs some groups
#                 in polling mode this way); off or empty: the config's own
#                 (default off)

SLATE_ROOT=${SLATE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SLATE_BUILD=${SLATE_BUILD:-$SLATE_ROOT/build-asan}
SLATE_LOGDIR=${SLATE_LOGDIR:-$SLATE_BUILD/test-logs}
SLATE_IQN=${SLATE_IQN:-iqn.2024-01.org.slate:test}
SLATE_NS=${SLATE_NS:-ns0}
mkdir -p "$SLATE_LOGDIR" 2>/dev/null || true

# ASan/UBSan: make errors fatal and loud so a sanitizer report fails the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:halt_on_error=1:print_summary=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

slate_die() {
	echo "error: $*" >&2
	exit 1
}

# slate_port_busy PORT -> 0 if something listens on 127.0.0.1:PORT
slate_port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# slate_free_port -> prints a TCP port nobody listens on (random, 20000-59999).
# Only for programs that cannot listen on port 0 and say which port they got
# (tgtd, iperf3 in bench/): between this check and their bind another program
# may take the port.  slated never needs it (see slate_start).
slate_free_port() {
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
		if ! ss -Htln 2>/dev/null | awk '{print $4}' | grep -q ":$p\$" && ! slate_port_busy "$p"; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# slate_wait_port PORT [SECS] [PID] -> 0 once the port accepts connections;
# 1 on timeout or if PID (when given) died first.
slate_wait_port() {
	local port=$1 secs=${2:-30} pid=${3:-} i
	for i in $(seq 1 $((secs * 10))); do
		slate_port_busy "$port" && return 0
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	return 1
}

# slate_write_config FILE PORT BACKEND SIZE_MIB [DATAFILE] [PORT2] [WP]
# Writes a slated config (src/mgmt/rpc.c method table): namespace ns0
# (BACKEND mem, file or rbd; DATAFILE: file's data file, rbd's image) as LUN 0 of $SLATE_IQN on
# 127.0.0.1:PORT.  PORT 0 lets slated pick a free port (slate_start then sets
# SLATE_PORT).  PORT2 (0 too, usually) adds a second portal for MultipathIO,
# listed after the first (SLATE_PORTS keeps that order).  WP=1 adds a
# write-protected namespace ns1 (8 MiB, mem) as LUN 1.  Portals come last,
# so once they listen the target is complete. SLATE_SANITIZE_RATE
# (MiB/s) paces ns0's sanitize operations (namespace_create sanitize_rate_mibps);
# SLATE_PHYS_BLOCK and SLATE_ATOMIC_MAX set ns0's physical_block_size and
# atomic_write_max.  A file BACKEND's DATAFILE directory goes into
# options.allowed_dirs (namespace files must lie in the state dir or there);
# SLATE_OPTIONS adds more "options" members (JSON text, e.g. '"nop_timeout_ms": 1000').
slate_write_config() {
	local file=$1 port=$2 backend=$3 size=$4 data=${5:-} port2=${6:-} wp=${7:-0} nsparams
	case $backend in
	mem) nsparams="\"name\": \"$SLATE_NS\", \"backend\": \"mem\", \"size\": \"${size}M\"" ;;
	file) nsparams="\"name\": \"$SLATE_NS\", \"backend\": \"file\", \"path\": \"$data\", \"size\": \"${size}M\"" ;;
	# rbd: DATAFILE is the image in pool "slate" of the cluster $CEPH_CONF names
	# (tests/lib/ceph-cluster.sh); size 0 takes the image's own.
	rbd) nsparams="\"name\": \"$SLATE_NS\", \"backend\": \"rbd\", \"pool\": \"slate\", \"image\": \"$data\", \"ceph_conf\": \"$CEPH_CONF\", \"size\": \"${size}M\"" ;;
	*) slate_die "unknown backend $backend" ;;
	esac
	{
		# a data file beside the state dir: its directory is allowed (options.allowed_dirs)
		local opts=${SLATE_OPTIONS:-}
		[ "$backend" = file ] && opts="\"allowed_dirs\": [\"$(dirname "$data")\"]${opts:+, $opts}"
		# rbd: the cluster's ceph.conf, and files beside the config (other LUNs' data)
		[ "$backend" = rbd ] && opts="\"allowed_dirs\": [\"$(dirname "$CEPH_CONF")\", \"$(dirname "$file")\"]${opts:+, $opts}"
		if [ -n "$opts" ]; then
			echo "{\"options\": {$opts},"
			echo ' "config": ['
		else
			echo '{"config": ['
		fi
		echo "  {\"method\": \"namespace_create\", \"params\": {$nsparams, \"block_size\": 512${SLATE_SANITIZE_RATE:+, \"sanitize_rate_mibps\": $SLATE_SANITIZE_RATE}${SLATE_PHYS_BLOCK:+, \"physical_block_size\": $SLATE_PHYS_BLOCK}${SLATE_ATOMIC_MAX:+, \"atomic_write_max\": \"$SLATE_ATOMIC_MAX\"}${SLATE_NS_EXTRA:+, $SLATE_NS_EXTRA}}},"
		echo "  {\"method\": \"iscsi_target_create\", \"params\": {\"name\": \"$SLATE_IQN\"}},"
		echo "  {\"method\": \"iscsi_lun_map\", \"params\": {\"target\": \"$SLATE_IQN\", \"lun\": 0, \"namespace\": \"$SLATE_NS\"}},"
		if [ "$wp" = 1 ]; then
			echo "  {\"method\": \"namespace_create\", \"params\": {\"name\": \"ns1\", \"backend\": \"mem\", \"size\": \"8M\", \"write_protect\": true}},"
			echo "  {\"method\": \"iscsi_lun_map\", \"params\": {\"target\": \"$SLATE_IQN\", \"lun\": 1, \"namespace\": \"ns1\"}},"
		fi
		if [ -n "$port2" ]; then
			echo "  {\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": $port}},"
			echo "  {\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": $port2}}"
		else
			echo "  {\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": $port}}"
		fi
		echo ']}'
	} >"$file"
}

# slate_read_ports LOG FIRST_LINE -> sets SLATE_PORTS / SLATE_NVME_PORTS (the
# iSCSI portals' and NVMe/TCP listeners' ports, in config order) and
# SLATE_PORT / SLATE_NVME_PORT (the first of each), SLATE_HTTP_PORT (the
# metrics and status page server, when configured) and SLATE_SOCK (the RPC
# socket) from the lines slated logged at FIRST_LINE or later.  Without them (e.g. -L warn) it asks
# slated over the RPC socket named in its ready line.
slate_read_ports() {
	local log=$1 first=$2 lines sock ctl
	lines=$(tail -n +"$first" "$log" 2>/dev/null)
	SLATE_PORTS=$(echo "$lines" | sed -n 's/.* portal listening on .*:\([0-9][0-9]*\)$/\1/p' | tr '\n' ' ')
	SLATE_NVME_PORTS=$(echo "$lines" | sed -n 's/.* NVMe\/TCP listener up on .*:\([0-9][0-9]*\)$/\1/p' | tr '\n' ' ')
	SLATE_HTTP_PORT=$(echo "$lines" | sed -n 's/.* HTTP metrics and status page listening on .*:\([0-9][0-9]*\)$/\1/p' | tail -n 1)
	sock=$(echo "$lines" | sed -n 's/.* ready: .*, rpc socket \(.*\)$/\1/p' | tail -n 1)
	SLATE_SOCK=$sock
	if [ -z "$SLATE_PORTS$SLATE_NVME_PORTS" ]; then
		ctl=${SLATECTL:-$SLATE_BUILD/slatectl}
		if [ -n "$sock" ] && [ -x "$ctl" ]; then
			SLATE_PORTS=$("$ctl" -s "$sock" --json iscsi_portal_list 2>/dev/null |
				python3 -c 'import json,sys; print(" ".join(str(p["port"]) for p in reversed(json.load(sys.stdin))))' 2>/dev/null)
			SLATE_NVME_PORTS=$("$ctl" -s "$sock" --json nvmf_listener_list 2>/dev/null |
				python3 -c 'import json,sys; print(" ".join(str(p["port"]) for p in reversed(json.load(sys.stdin))))' 2>/dev/null)
		fi
	fi
	SLATE_PORT=${SLATE_PORTS%% *}
	SLATE_NVME_PORT=${SLATE_NVME_PORTS%% *}
}

# slate_start STATEDIR CONFIG PORT LOG [extra slated args...]
# Starts slated in the background; sets SLATE_PID and, from its log, the
# ports it listens on (slate_read_ports: SLATE_PORT, SLATE_PORTS,
# SLATE_NVME_PORT, SLATE_NVME_PORTS).  PORT is the port the config names:
# 0 when slated picks (then a restart may get another port: use the
# variables after every start), or a fixed one to wait for.  Returns
# non-zero (and prints the log tail) if slated is not ready and listening
# within 30 s.
slate_start() {
	local state=$1 cfg=$2 port=$3 log=$4
	shift 4
	local bin=${SLATED:-$SLATE_BUILD/slated}
	[ -x "$bin" ] || {
		echo "slated not built: $bin" >&2
		return 1
	}
	mkdir -p "$state"
	local first ready=0
	first=$(($(wc -l <"$log" 2>/dev/null || echo 0) + 1))
	SLATE_PORT= SLATE_PORTS= SLATE_NVME_PORT= SLATE_NVME_PORTS= SLATE_HTTP_PORT=
	if [ -n "${SLATE_REACTOR_POLL:-}" ] && [ "$SLATE_REACTOR_POLL" != off ]; then
		slate_config_poll "$cfg" "$SLATE_REACTOR_POLL" || return 1
	fi
	# shellcheck disable=SC2086
	"$bin" --config "$cfg" --state-dir "$state" ${SLATED_EXTRA:-} "$@" >>"$log" 2>&1 &
	SLATE_PID=$!
	# Wait for this daemon's own "ready" line (printed after its portals are
	# bound), not just for a port: after a SIGKILL the dead daemon's
	# listening socket lives on for a moment while the kernel tears down its
	# io_uring, and a connection made then is reset.
	local i
	for i in $(seq 1 300); do
		if tail -n +"$first" "$log" 2>/dev/null | grep -q ' ready: '; then
			ready=1
			break
		fi
		kill -0 "$SLATE_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ "$ready" = 1 ] && slate_read_ports "$log" "$first"
	[ "$port" = 0 ] && port=${SLATE_PORT:-$SLATE_NVME_PORT}
	if [ "$ready" != 1 ] || [ -z "$port" ] || ! slate_wait_port "$port" 30 "$SLATE_PID"; then
		echo "slated did not start listening (port ${port:-unknown}); log tail:" >&2
		tail -n 30 "$log" >&2
		slate_stop
		return 1
	fi
	return 0
}

# slate_config_poll CONFIG MODE -> sets options.reactor_poll of the JSON
# config file CONFIG to MODE (off | adaptive | always), keeping the rest.
slate_config_poll() {
	python3 - "$1" "$2" <<'PY'
import json, sys
path, mode = sys.argv[1], sys.argv[2]
with open(path) as f:
    cfg = json.load(f)
cfg.setdefault("options", {})["reactor_poll"] = mode
with open(path, "w") as f:
    json.dump(cfg, f, indent=1)
    f.write("\n")
PY
}

# slate_poll_verify -> 0 if the running slated (SLATE_SOCK) is in the reactor
# polling mode SLATE_REACTOR_POLL asked for: polling spins counted
# (reactor_stats .total.polls > 0) for adaptive and always, none for off or
# unset.  Prints the mode and the spins either way.
slate_poll_verify() {
	local mode=${SLATE_REACTOR_POLL:-off} polls
	polls=$("${SLATECTL:-$SLATE_BUILD/slatectl}" -s "$SLATE_SOCK" --json reactor_stats 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["polls"])' 2>/dev/null)
	echo "reactor_poll $mode: $polls polling spins"
	[ -n "$polls" ] || return 1
	case $mode in
	adaptive | always) [ "$polls" -gt 0 ] ;;
	*) [ "$polls" = 0 ] ;;
	esac
}

# slate_poll_sample -> with SLATE_POLL_LOG set (tests/run-all.sh sets it
# for the groups it checks), appends "MODE SPINS" for the running slated:
# its reactor mode as asked (SLATE_REACTOR_POLL) and the polling spins
# reactor_stats counted (the largest "polls" in its answer, the total's),
# or "MODE ?" when it could not be asked.  slate_stop calls it before the
# signal; run-all turns a group's samples into one reactor-poll result.
slate_poll_sample() {
	[ -n "${SLATE_POLL_LOG:-}" ] && [ -n "${SLATE_SOCK:-}" ] && [ -n "${SLATE_PID:-}" ] || return 0
	kill -0 "$SLATE_PID" 2>/dev/null || return 0
	local polls
	polls=$("${SLATECTL:-$SLATE_BUILD/slatectl}" -s "$SLATE_SOCK" -t 5 --json reactor_stats 2>/dev/null |
		grep -o '"polls": *[0-9]*' | grep -o '[0-9]*$' | sort -n | tail -n 1)
	echo "${SLATE_REACTOR_POLL:-off} ${polls:-?}" >>"$SLATE_POLL_LOG"
}

# slate_alive -> 0 if the slated we started is still running
slate_alive() {
	[ -n "${SLATE_PID:-}" ] && kill -0 "$SLATE_PID" 2>/dev/null
}

# slate_stop [SIGNAL] -> stops the slated we started (SIGTERM, then SIGKILL
# after 10 s) and returns its exit status (128+n for a signal).
slate_stop() {
	local sig=${1:-TERM} i rc=0
	[ -n "${SLATE_PID:-}" ] || return 0
	slate_poll_sample
	kill -"$sig" "$SLATE_PID" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$SLATE_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$SLATE_PID" 2>/dev/null; then
		echo "slated did not exit on SIG$sig; killing" >&2
		kill -KILL "$SLATE_PID" 2>/dev/null || true
	fi
	wait "$SLATE_PID" 2>/dev/null || rc=$?
	SLATE_PID=
	return $rc
}

# slate_url PORT [LUN] -> iSCSI URL of the test target
slate_url() {
	echo "iscsi://127.0.0.1:$1/$SLATE_IQN/${2:-0}"
}

# slate_sanitizer_clean LOG -> 0 if LOG holds no ASan/UBSan/LeakSanitizer report
slate_sanitizer_clean() {
	! grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$1"
}

# slate_result PASS|FAIL|SKIP NAME [LOG] [REASON]
# The one result line run-all.sh counts ("PASS name", "FAIL name (reason)",
# "SKIP name (reason)").  On FAIL the log's tail follows, indented so that it
# is never mistaken for a result line.
slate_result() {
	local st=$1 name=$2 log=${3:-} reason=${4:-}
	if [ -n "$reason" ]; then
		echo "$st $name ($reason)"
	else
		echo "$st $name"
	fi
	if [ "$st" = FAIL ] && [ -n "$log" ] && [ -s "$log" ]; then
		tail -n "${SLATE_TAIL:-25}" "$log" | sed 's/^/    | /'
	fi
}

# Inside linuxvm (TCG) python3 takes ~1.3 s to start and ~0.6 s without the
# site module (measured under load); the tests' python (JSON fields, struct
# packing) needs only the standard library, and the e2e parts run it dozens
# of times, some in wait_for loops.
if [ "${LINUXVM:-}" = 1 ]; then
	python3() { command python3 -S "$@"; }
fi
# On the host, python3 is Debian's (/usr/bin/python3; the VM's PATH has
# nothing else).  A pyenv shim ahead of it in PATH runs pyenv-exec's version
# lookup (a dozen bash processes) at every start: 3.6-6.7 s per python3 on the
# loaded 2-core machine against 0.15-0.6 s for Debian's, measured back to
# back, and the host groups start it hundreds of times (JSON fields of
# slatectl's output, verdicts, wait loops).  Only the standard library is used.
if [ "${LINUXVM:-}" != 1 ] && [ -x /usr/bin/python3 ]; then
	case ":$PATH:" in
	*/.pyenv/*)
		PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.pyenv/' | paste -sd: -)
		export PATH
		;;
	esac
fi

# slate_vm_run NAME TIMEOUT CMD... -> on the host: boots ../shared/tools/linuxvm
# (or $LINUXVM) and runs CMD inside with SLATE_BUILD, SLATE_REACTOR_POLL and SLATE_LOGDIR (the
# host's $SLATE_LOGDIR/NAME, shared read-write) set; prints CMD's result
# lines.  A VM that cannot boot or run, or a CMD that fails without a FAIL
# line, is one failure NAME.vm — never a skip.  Returns CMD's status.
slate_vm_run() {
	local name=$1 tmo=$2 rc
	shift 2
	local logdir=$SLATE_LOGDIR/$name vm=${LINUXVM:-../shared/tools/linuxvm/linuxvm}
	mkdir -p "$logdir"
	if [ ! -x "$vm" ]; then
		slate_result FAIL "$name.vm" "" "linuxvm not found at $vm"
		return 1
	fi
	# SLATE_BUILD is an absolute path on the host, the same path inside the VM.
	local try
	for try in 1 2; do
		"$vm" --timeout "${E2E_TIMEOUT:-$tmo}" --env "SLATE_BUILD=$SLATE_BUILD" \
			--env "SLATE_LOGDIR=$logdir" --env "SLATE_REACTOR_POLL=${SLATE_REACTOR_POLL:-}" -- "$@" >"$logdir/vm.stdout" 2>"$logdir/vm.stderr"
		rc=$?
		# The guest kernel itself can die while booting under TCG (seen: an
		# int3 Oops in sched_clock_cpu while the kernel patches its own text,
		# QEMU's cross-modifying-code emulation). That is before COMMAND ran,
		# so nothing of ours was tested: boot once more, and say so.
		[ "$try" = 1 ] && [ "$rc" = 125 ] && [ ! -s "$logdir/vm.stdout" ] &&
			grep -q 'Kernel panic' "$logdir/vm.stderr" || break
		cp "$logdir/vm.stderr" "$logdir/vm.stderr.panic1"
		echo "NOTE $name: the guest kernel panicked while booting (before the test ran; console in $logdir/vm.stderr.panic1); booting again" >&2
	done
	grep -E '^(PASS|FAIL|SKIP) |^    \| ' "$logdir/vm.stdout"
	case $rc in
	0) ;;
	124) slate_result FAIL "$name.vm" "$logdir/vm.stderr" "linuxvm timed out" ;;
	125) slate_result FAIL "$name.vm" "$logdir/vm.stderr" "the VM failed to boot or run" ;;
	*)
		grep -q '^FAIL ' "$logdir/vm.stdout" ||
			slate_result FAIL "$name.vm" "$logdir/vm.stderr" "$* exit status $rc"
		;;
	esac
	return $rc
}

# slate_check PREFIX NAME CMD... -> runs CMD with its output in
# $SLATE_LOGDIR/NAME.log and prints one PASS/FAIL PREFIX.NAME line; counts
# in slate_npass / slate_nfail.
slate_npass=0
slate_nfail=0
slate_check() {
	local prefix=$1 name=$2
	shift 2
	local out=$SLATE_LOGDIR/$name.log
	if "$@" >"$out" 2>&1; then
		slate_result PASS "$prefix.$name"
		slate_npass=$((slate_npass + 1))
	else
		slate_result FAIL "$prefix.$name" "$out"
		slate_nfail=$((slate_nfail + 1))
	fi
}
