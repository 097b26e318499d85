# shellcheck shell=bash disable=SC2154  # (tcore, lcore: set by the bench that sources this)
# bench/floors.sh — sourced by bench/nvmf, bench/iscsi and bench/scale (after tests/lib.sh):
# the transport's floors on this machine, with the targets' pinning (server
# on core $tcore, client on core $lcore), and the polling modes of a run.
#
#   floor_sockperf SECS  -> "mean p50 p99" of a `sockperf ping-pong` TCP round
#                           trip on loopback in µs (64-byte messages, both
#                           ends blocking in recvfrom: an event-driven
#                           ping-pong, the floor of a QD1 I/O), or "n/a"
#   floor_iperf3 SECS    -> single-stream iperf3 loopback bandwidth in MiB/s
#                           (the floor of a large sequential read), or "n/a"
#   perf_poll_args MODE  -> slate-perf's --poll argument for a target in
#                           reactor mode MODE: the pair measures the target,
#                           not the load generator's sleep, so slate-perf
#                           polls the way the target does (off: sleeps)
#   slated_poll_options MODE -> the config's "options" members for MODE
#                           (reactor_poll, and BENCH_POLL_US as reactor_poll_us)

floor_sockperf() {
	local secs=$1 port pid out mean p50 p99
	command -v sockperf >/dev/null || {
		echo "n/a"
		return
	}
	port=$(slate_free_port)
	taskset -c "$tcore" sockperf server --tcp -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
	pid=$!
	slate_wait_port "$port" 10 "$pid" >/dev/null 2>&1
	out=$(taskset -c "$lcore" timeout $((secs + 30)) sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" \
		-m 64 -t "$secs" --full-rtt 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	mean=$(echo "$out" | sed -n 's/.*Summary: Round trip is \([0-9.]*\) usec.*/\1/p' | tail -n 1)
	p50=$(echo "$out" | sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' | tail -n 1)
	p99=$(echo "$out" | sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' | tail -n 1)
	if [ -n "$mean" ]; then
		printf '%.1f %.1f %.1f\n' "$mean" "${p50:-0}" "${p99:-0}"
	else
		echo "n/a"
	fi
}

floor_iperf3() {
	local secs=$1 port pid mibs
	command -v iperf3 >/dev/null || {
		echo "n/a"
		return
	}
	port=$(slate_free_port)
	taskset -c "$tcore" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
	pid=$!
	sleep 1 # (no port probe: iperf3 -s -1 would take the probe for its one client)
	mibs=$(taskset -c "$lcore" timeout $((secs + 30)) iperf3 -c 127.0.0.1 -p "$port" -t "$secs" -J 2>/dev/null |
		jq -r '.end.sum_received.bits_per_second / 8 / 1048576 | floor' 2>/dev/null)
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	echo "${mibs:-n/a}"
}

perf_poll_args() {
	case $1 in
	adaptive) echo "--poll=adaptive${BENCH_POLL_US:+:$BENCH_POLL_US}" ;;
	always) echo "--poll=always" ;;
	*) echo "--poll=off" ;;
	esac
}

slated_poll_options() {
	echo "\"reactor_poll\":\"$1\"${BENCH_POLL_US:+,\"reactor_poll_us\":$BENCH_POLL_US}"
}

# ratio A B -> A/B with two decimals, or n/a
ratio() {
	awk -v a="${1:-}" -v b="${2:-}" 'BEGIN {if (a != "" && a != "n/a" && b != "" && b != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a"}'
}

# aim VALUE OP LIMIT -> "ok" / "MISSED" / "" (VALUE n/a) for the ratio lines
aim() {
	awk -v v="${1:-}" -v op="$2" -v l="$3" 'BEGIN {
		if (v == "" || v == "n/a") { print ""; exit }
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print ok ? "ok" : "MISSED"
	}'
}

# precondition LOGNAME MODE TARGET-ARGS... : slate-perf (polling as MODE) writes the whole mem namespace once,
# sequentially, before its rows.  The mem backend gets its pages from the
# kernel at the first write, so on a fresh namespace a random write pays a
# page fault (and a read of a block never written maps the zero page): a
# few microseconds per I/O at QD1 that a real device, SPDK's malloc bdev
# (allocated and touched at creation) and tgt's /dev/shm file (written by
# dd in the scripts) do not pay.  A benchmark measures the steady state.
precondition() {
	local name=$1 m=$2
	shift 2
	# shellcheck disable=SC2046
	taskset -c "$lcore" timeout 300 "$perf_bin" --cpu "$lcore" $(perf_poll_args "$m") -d 300 \
		-s "${size}M" -b 128k -r seq -M 0 -q 8 --bytes "${size}m" "$@" >/dev/null 2>"$SLATE_LOGDIR/$name-precondition-$m.err" ||
		echo "  precondition ($m) failed: $(tail -n 1 "$SLATE_LOGDIR/$name-precondition-$m.err")" >&2
}

# cpu_ticks PID -> utime + stime of the whole process (all threads), in
# clock ticks (0 when it is gone)
cpu_ticks() {
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
