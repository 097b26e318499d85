# bench/rstats.sh — sourced by bench/nvmf and bench/iscsi: slated's reactor
# counters (the reactor_stats RPC, src/rt/reactor.h struct rt_stats) around
# one run, as ratios per I/O.  Needs SLATE_SOCK (tests/lib.sh slate_start)
# and jq.

# rstats_snap -> the summed counters as one tab-separated line (empty if
# slated cannot be asked): io_uring_enter submit-only, io_uring_enter waits
# (sleeps), wake-ups by a completion, eventfd wake-ups, recv calls, sendmsg
# calls, bytes copied (all sites), commands completed (both transports),
# polling spins (non-blocking io_uring_enter, reactor_poll).
rstats_snap() {
	[ -n "${SLATE_SOCK:-}" ] || return 0
	"${SLATECTL:-$SLATE_BUILD/slatectl}" -s "$SLATE_SOCK" --json reactor_stats 2>/dev/null |
		jq -r '.total | [.enter_submit, .enter_wait, .wakeups, .msg_wakeups, .recv_calls,
			.send_calls, ([.copy_bytes[]] | add), ([.commands[]] | add), .polls] | @tsv' 2>/dev/null
}

# rstats_per_io BEFORE AFTER IOS -> "syscalls sleeps recvs sends copyB" per I/O
# (syscalls = io_uring_enter, polling spins included, + recv + sendmsg), or "n/a".
rstats_per_io() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {
		na = split(a, x, "\t"); nb = split(b, y, "\t")
		if (na < 9 || nb < 9 || n <= 0) { print "n/a"; exit }
		for (i = 1; i <= 9; i++) d[i] = (y[i] - x[i]) / n
		printf "%.2f %.2f %.2f %.2f %.0f\n", d[1] + d[2] + d[5] + d[6] + d[9], d[2], d[5], d[6], d[7]
	}'
}
RSTATS_HEAD="sys/IO sleep/IO recv/IO send/IO copyB/IO"
