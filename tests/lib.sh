# tests/lib.sh — shared shell helpers for Slate's test scripts (sourced, not run).
#
# Starts and stops slated with a throw-away state dir, a generated JSON config
# (a replayable list of RPC calls, see src/mgmt/mgmt.h and DESIGN.md
# "Configuration is a table") and a free TCP port; waits for the port; finds
# binaries.  Everything here is plain bash so it also runs inside linuxvm.
#
# Variables a caller may set before sourcing:
#   SLATE_BUILD   build dir holding slated (default build-asan)
#   SLATE_LOGDIR  where logs go (default $SLATE_BUILD/test-logs)
#   SLATED_EXTRA  extra arguments for slated

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

# slate_free_port -> prints a TCP port nobody listens on (random, 20000-59999)
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
# (BACKEND mem or file, DATAFILE for file) as LUN 0 of $SLATE_IQN on
# 127.0.0.1:PORT.  PORT2 adds a second portal (MultipathIO).  WP=1 adds a
# write-protected namespace ns1 (8 MiB, mem) as LUN 1.  Portals come last, so
# once the port listens the target is complete.  SLATE_SANITIZE_RATE (MiB/s)
# paces ns0's sanitize operations (namespace_create sanitize_rate_mibps).
slate_write_config() {
	local file=$1 port=$2 backend=$3 size=$4 data=${5:-} port2=${6:-} wp=${7:-0} nsparams
	case $backend in
	mem) nsparams="\"name\": \"$SLATE_NS\", \"backend\": \"mem\", \"size\": \"${size}M\"" ;;
	file) nsparams="\"name\": \"$SLATE_NS\", \"backend\": \"file\", \"path\": \"$data\", \"size\": \"${size}M\"" ;;
	*) slate_die "unknown backend $backend" ;;
	esac
	{
		echo '{"config": ['
		echo "  {\"method\": \"namespace_create\", \"params\": {$nsparams, \"block_size\": 512${SLATE_SANITIZE_RATE:+, \"sanitize_rate_mibps\": $SLATE_SANITIZE_RATE}}},"
		echo "  {\"method\": \"iscsi_target_create\", \"params\": {\"name\": \"$SLATE_IQN\"}},"
		echo "  {\"method\": \"iscsi_lun_map\", \"params\": {\"target\": \"$SLATE_IQN\", \"lun\": 0, \"namespace\": \"$SLATE_NS\"}},"
		if [ "$wp" = 1 ]; then
			echo "  {\"method\": \"namespace_create\", \"params\": {\"name\": \"ns1\", \"backend\": \"mem\", \"size\": \"8M\", \"write_protect\": true}},"
			echo "  {\"method\": \"iscsi_lun_map\", \"params\": {\"target\": \"$SLATE_IQN\", \"lun\": 1, \"namespace\": \"ns1\"}},"
		fi
		if [ -n "$port2" ]; then
			echo "  {\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": $port2}},"
		fi
		echo "  {\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": $port}}"
		echo ']}'
	} >"$file"
}

# slate_start STATEDIR CONFIG PORT LOG [extra slated args...]
# Starts slated in the background; sets SLATE_PID.  Returns non-zero (and
# prints the log tail) if it does not listen within 30 s.
slate_start() {
	local state=$1 cfg=$2 port=$3 log=$4
	shift 4
	local bin=${SLATED:-$SLATE_BUILD/slated}
	[ -x "$bin" ] || {
		echo "slated not built: $bin" >&2
		return 1
	}
	mkdir -p "$state"
	local before
	before=$(grep -c ' ready: ' "$log" 2>/dev/null)
	# shellcheck disable=SC2086
	"$bin" --config "$cfg" --state-dir "$state" ${SLATED_EXTRA:-} "$@" >>"$log" 2>&1 &
	SLATE_PID=$!
	# Wait for this daemon's own "ready" line (printed after its portals are
	# bound), not just for the port: after a SIGKILL the dead daemon's
	# listening socket lives on for a moment while the kernel tears down its
	# io_uring, and a connection made then is reset.
	local i
	for i in $(seq 1 300); do
		[ "$(grep -c ' ready: ' "$log" 2>/dev/null)" -gt "${before:-0}" ] && break
		kill -0 "$SLATE_PID" 2>/dev/null || break
		sleep 0.1
	done
	if ! slate_wait_port "$port" 30 "$SLATE_PID"; then
		echo "slated did not start listening on port $port; log tail:" >&2
		tail -n 30 "$log" >&2
		slate_stop
		return 1
	fi
	return 0
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
