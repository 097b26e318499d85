#!/bin/bash
# tests/run-all.sh — the one test command behind `make test` (DESIGN.md "Tests").
#
# Builds the ASan+UBSan debug build (build-asan/) and the clang libFuzzer
# build (build-fuzz/), then runs every group: unit (cmocka via meson test),
# conformance (libiscsi iscsi-test-cu), robustness (malformed PDUs),
# durability (kill -9 and read back), rbd (the Ceph RBD backend on a
# throw-away cluster), e2e (Linux initiator in linuxvm) and
# the fuzzers.  Every group prints one line per test — "PASS name",
# "FAIL name (why)" followed by an indented log tail, "SKIP name (why)" — and
# this script counts them.  The last line is exactly
# "N passed, N failed" (plus ", N skipped" when any were skipped); the exit
# status is non-zero if anything failed.  Logs: build-asan/test-logs/.
#
# Usage: tests/run-all.sh [group...]   groups: build unit conformance robust
#                                      robust_nvme limits metrics reload durability rbd service e2e
#                                      e2e_nvme e2e_cross package fuzz
#                                      (default: all)
# Environment: FUZZ_SECS (per fuzzer, default 20), GROUP_TIMEOUT_<group>,
#              SLATE_SERIAL_VMS=1 (every group in the foreground, one after
#              the other: no groups beside e2e or e2e_cross, no second lane
#              of light groups, no prebuild, package at the end),
#              SLATE_POLL_GROUPS (groups whose slated polls, default
#              "rbd robust robust_nvme limits metrics reload durability
#              service"; add e2e_nvme for the kernel host), SLATE_POLL_MODE
#              (their mode, default adaptive), SLATE_REACTOR_POLL (every
#              other group's, default off).
#
# Polling mode (issue 13): the groups in SLATE_POLL_GROUPS start slated with
# options.reactor_poll adaptive (tests/lib.sh SLATE_REACTOR_POLL): rbd
# (libiscsi's whole suite in three shards, two gateways, durability), beside
# e2e, and the host-side groups robust .. service (malformed PDUs and
# commands, idle and login timeouts, CHAP, ACLs, TLS, metrics, live reload,
# kill -9 durability, the service part), in two lanes on a machine they
# leave half idle.  Event mode (off, the default users run) keeps
# conformance (libiscsi's whole suite: so both modes run it) and every
# Linux-kernel VM group: e2e, e2e_nvme, e2e_cross, package.  Not the VM
# groups: their guests keep both cores busy already, and a spinning reactor
# under TCG emulation costs far more (e2e_nvme took 427 s in adaptive mode
# at c943af4, 295 s in event mode the clone before; SLATE_POLL_GROUPS with
# e2e_nvme added still runs it).  Not conformance: its five clients at once
# keep an adaptive reactor spinning nearly all the time (526 s instead of
# 395 s on the loaded machine).  Not always: a reactor that never sleeps
# takes a whole core of the two.  Each slated-starting group's "=== name
# ===" header says its mode, and the groups assert it: the conformance
# shards and e2e_nvme with their own reactor-poll results, robust ..
# service with one per group (poll_result below).
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
export SLATE_ROOT=$root
export SLATE_BUILD=$root/build-asan
export SLATE_LOGDIR=$root/build-asan/test-logs
mkdir -p "$SLATE_LOGDIR"
. tests/lib.sh

groups=${*:-build unit conformance robust robust_nvme limits metrics reload durability rbd service e2e e2e_nvme e2e_cross package fuzz}
npass=0
nfail=0
nskip=0
failed_names=()
jobs_n=$(nproc 2>/dev/null || echo 2)

poll_groups=${SLATE_POLL_GROUPS-rbd robust robust_nvme limits metrics reload durability service}
# gmode NAME -> the reactor mode of the group's slated
gmode() {
	case " $poll_groups " in
	*" $1 "*) echo "${SLATE_POLL_MODE:-adaptive}" ;;
	*) echo "${SLATE_REACTOR_POLL:-off}" ;;
	esac
}
# gtitle NAME -> the group's header: its name, and its reactor mode for the
# groups that start slated
gtitle() {
	case $1 in
	build | build_fuzz | unit | fuzz | package | package_deb) echo "$1" ;;
	*) echo "$1 (slated reactor_poll $(gmode "$1"))" ;;
	esac
}

# The host-side groups that start slated many times (robust .. service)
# check the reactor mode it ran in: tests/lib.sh slate_stop samples each
# instance's polling spins into SLATE_POLL_LOG, and poll_result makes one
# GROUP.reactor-poll line of them: in adaptive or always mode at least one
# instance must have spun (a slated stopped right after starting may not
# have), in event mode none may.
poll_check="robust robust_nvme limits metrics reload durability service"
poll_log() { # NAME -> the group's sample file (empty: not checked), emptied
	case " $poll_check " in
	*" $1 "*)
		rm -f "$SLATE_LOGDIR/polls-$1.txt"
		echo "$SLATE_LOGDIR/polls-$1.txt"
		;;
	esac
}
poll_result() { # NAME FILE -> one PASS/FAIL line
	local name=$1 f=$2 mode n spun
	mode=$(gmode "$name")
	n=$(grep -c . "$f" 2>/dev/null)
	spun=$(awk '$2 ~ /^[0-9]+$/ && $2 > 0' "$f" 2>/dev/null | grep -c .)
	if [ "${n:-0}" = 0 ]; then
		slate_result FAIL "$name.reactor-poll" "" "no slated of the group could be asked for its spins"
	elif [ "$mode" = off ] && [ "$spun" = 0 ]; then
		slate_result PASS "$name.reactor-poll" "" "reactor_poll off: none of $n slated instances spun"
	elif [ "$mode" != off ] && [ "$spun" -gt 0 ]; then
		slate_result PASS "$name.reactor-poll" "" "reactor_poll $mode: $spun of $n slated instances spun"
	else
		slate_result FAIL "$name.reactor-poll" "$f" "reactor_poll $mode: $spun of $n slated instances spun"
	fi
}

# run_group NAME TIMEOUT CMD... — runs CMD, echoes its output, counts its
# result lines; a group that exits non-zero without reporting a failure (or
# is killed by its timeout) is itself counted as one failure.  CMD runs with
# SLATE_REACTOR_POLL set to the group's mode (gmode).
run_group() {
	local name=$1 tmo=$2 out rc t0 plog
	shift 2
	out=$SLATE_LOGDIR/group-$name.out
	echo "=== $(gtitle "$name") ==="
	t0=$(date +%s)
	plog=$(poll_log "$name")
	SLATE_POLL_LOG=$plog SLATE_REACTOR_POLL=$(gmode "$name") timeout -k 20 "$tmo" "$@" 2>"$SLATE_LOGDIR/group-$name.err" | tee "$out"
	rc=${PIPESTATUS[0]}
	[ -n "$plog" ] && poll_result "$name" "$plog" | tee -a "$out"
	echo "--- $name: $(($(date +%s) - t0)) s"
	count_group "$name" "$tmo" "$rc"
}

# count_group NAME TIMEOUT RC — adds the group's result lines (in its .out
# file) to the totals.
count_group() {
	local name=$1 tmo=$2 rc=$3 out p f s
	out=$SLATE_LOGDIR/group-$name.out
	p=$(grep -c '^PASS ' "$out")
	f=$(grep -c '^FAIL ' "$out")
	s=$(grep -c '^SKIP ' "$out")
	while read -r n; do failed_names+=("$n"); done < <(grep '^FAIL ' "$out" | awk '{print $2}')
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		slate_result FAIL "$name.group" "$SLATE_LOGDIR/group-$name.err" "group timed out after ${tmo}s"
		f=$((f + 1))
		failed_names+=("$name.group")
	elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		slate_result FAIL "$name.group" "$SLATE_LOGDIR/group-$name.err" "exit status $rc without a failing test"
		f=$((f + 1))
		failed_names+=("$name.group")
	fi
	npass=$((npass + p))
	nfail=$((nfail + f))
	nskip=$((nskip + s))
}

# bg_group NAME TIMEOUT CMD... — starts the group in the background, its
# output to its .out file (run_bg_groups waits for it, then bg_collect
# prints and counts it).  Used for VM groups: a TCG guest spends much of
# its time waiting on timers and the host's I/O, so two guests share the
# 2-core machine well.
bg_group() {
	local name=$1 tmo=$2 t0 plog rc
	shift 2
	t0=$(date +%s)
	rm -f "$SLATE_LOGDIR/group-$name.rc"
	plog=$(poll_log "$name")
	SLATE_POLL_LOG=$plog SLATE_REACTOR_POLL=$(gmode "$name") timeout -k 20 "$tmo" "$@" >"$SLATE_LOGDIR/group-$name.out" 2>"$SLATE_LOGDIR/group-$name.err"
	rc=$?
	[ -n "$plog" ] && poll_result "$name" "$plog" >>"$SLATE_LOGDIR/group-$name.out"
	echo "$rc $(($(date +%s) - t0))" >"$SLATE_LOGDIR/group-$name.rc"
}
bg_collect() {
	local name=$1 tmo=$2 rc=1 secs=?
	echo "=== $(gtitle "$name") ==="
	cat "$SLATE_LOGDIR/group-$name.out"
	[ -s "$SLATE_LOGDIR/group-$name.rc" ] && read -r rc secs <"$SLATE_LOGDIR/group-$name.rc"
	echo "--- $name: $secs s (in parallel with another group)"
	count_group "$name" "$tmo" "$rc"
}

gtimeout() { # per-group timeout, overridable by GROUP_TIMEOUT_<name>
	local v=GROUP_TIMEOUT_$1
	echo "${!v:-$2}"
}

# --- group: build ----------------------------------------------------------
# build.asan then build.fuzz; when the fuzz group is asked for too, build.fuzz
# runs in the background instead (see prebuild below).
group_build() {
	local rc=0
	group_build_asan || rc=1
	group_build_fuzz || rc=1
	return $rc
}
group_build_asan() {
	local log=$SLATE_LOGDIR/build-asan.log
	{
		if [ ! -f build-asan/build.ninja ]; then
			rm -rf build-asan/meson-private build-asan/meson-info
			meson setup build-asan -Db_sanitize=address,undefined -Dbuildtype=debug
		fi && ninja -C build-asan -j "$jobs_n"
	} >"$log" 2>&1 && slate_result PASS build.asan || {
		slate_result FAIL build.asan "$log" "meson/ninja failed"
		return 1
	}
}
group_build_fuzz() {
	local log rc=0
	log=$SLATE_LOGDIR/build-fuzz.log
	{
		echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$SLATE_LOGDIR/fuzzprobe.c" &&
			clang -fsanitize=fuzzer "$SLATE_LOGDIR/fuzzprobe.c" -o "$SLATE_LOGDIR/fuzzprobe" &&
			echo "clang -fsanitize=fuzzer links" &&
			if [ ! -f build-fuzz/build.ninja ]; then
				rm -rf build-fuzz
				CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined \
					-Db_lundef=false -Dbuildtype=debug
			fi && ninja -C build-fuzz -j "$jobs_n"
	} >"$log" 2>&1 && slate_result PASS build.fuzz || {
		slate_result FAIL build.fuzz "$log" "clang libFuzzer build failed"
		rc=1
	}
	return $rc
}

# --- group: unit -------------------------------------------------------------
group_unit() {
	local log=$SLATE_LOGDIR/unit.log rc
	[ -f build-asan/build.ninja ] || {
		slate_result FAIL unit "" "build-asan not configured"
		return 1
	}
	rm -f build-asan/meson-logs/testlog.json
	meson test -C build-asan --suite unit --print-errorlogs --num-processes "$jobs_n" >"$log" 2>&1
	rc=$?
	if [ ! -s build-asan/meson-logs/testlog.json ]; then
		if grep -q 'No tests defined\|No suitable tests' "$log"; then
			return 0 # nothing registered yet
		fi
		slate_result FAIL unit "$log" "meson test ran nothing (rc=$rc)"
		return 1
	fi
	# one JSON object per line: {"name": ..., "result": "OK"|"FAIL"|"SKIP"|...}
	python3 - build-asan/meson-logs/testlog.json "$log" <<'PY'
import json, sys
bad = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    t = json.loads(line)
    name = "unit." + t["name"].split(" / ")[-1].split(":")[-1]
    r = t.get("result", "")
    if r in ("OK", "EXPECTEDFAIL"):
        print("PASS", name)
    elif r == "SKIP":
        print("SKIP", name, "(skipped by the test itself)")
    else:
        bad = 1
        print("FAIL", name, "(%s)" % r)
        for l in (t.get("stdout") or "").splitlines()[-25:]:
            print("    | " + l)
sys.exit(bad)
PY
}

# --- group: fuzz -------------------------------------------------------------
# One fuzzer per core at once (each is single-threaded); the result lines
# come out in the targets' order when all are done.
fuzz_one() {
	local f=$1 secs=$2 name corpus log work
	name=${f##*/fuzz_}
	log=$SLATE_LOGDIR/fuzz_$name.log
	# New inputs go to a scratch dir; the committed seeds stay read-only.
	work=$SLATE_LOGDIR/fuzz-corpus-$name
	mkdir -p "$work"
	corpus=()
	[ -d "tests/fuzz/corpus/$name" ] && corpus=("tests/fuzz/corpus/$name")
	if (cd "$SLATE_LOGDIR" && timeout -k 10 $((secs + 120)) "$root/$f" -max_total_time="$secs" \
		-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$work" "${corpus[@]/#/$root/}") >"$log" 2>&1; then
		echo "PASS fuzz.$name ($(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1) inputs)" >"$SLATE_LOGDIR/fuzz_$name.result"
	else
		slate_result FAIL "fuzz.$name" "$log" "crash/leak/timeout; reproducer in $SLATE_LOGDIR" >"$SLATE_LOGDIR/fuzz_$name.result"
	fi
}
group_fuzz() {
	local secs=${FUZZ_SECS:-20} rc=0 f name running=0
	shopt -s nullglob
	local bins=(build-fuzz/tests/fuzz_*) run=()
	[ ${#bins[@]} -gt 0 ] || return 0
	for f in "${bins[@]}"; do
		[ -x "$f" ] && [ -f "$f" ] || continue
		run+=("$f")
		rm -f "$SLATE_LOGDIR/fuzz_${f##*/fuzz_}.result"
		fuzz_one "$f" "$secs" &
		running=$((running + 1))
		if [ "$running" -ge "$jobs_n" ]; then
			wait -n
			running=$((running - 1))
		fi
	done
	wait
	for f in "${run[@]}"; do
		name=${f##*/fuzz_}
		if [ -s "$SLATE_LOGDIR/fuzz_$name.result" ]; then
			cat "$SLATE_LOGDIR/fuzz_$name.result"
			grep -q '^PASS ' "$SLATE_LOGDIR/fuzz_$name.result" || rc=1
		else
			slate_result FAIL "fuzz.$name" "$SLATE_LOGDIR/fuzz_$name.log" "the fuzzer left no result"
			rc=1
		fi
	done
	return $rc
}

# The group functions run under timeout(1) in a child bash.
export root jobs_n
export -f slate_result group_build group_build_asan group_build_fuzz group_unit fuzz_one group_fuzz

# beside A B -> true when groups A and B are both asked for and may run side
# by side (not SLATE_SERIAL_VMS=1).
beside() {
	[ "${SLATE_SERIAL_VMS:-0}" = 1 ] && return 1
	case " $groups " in *" $1 "*) ;; *) return 1 ;; esac
	case " $groups " in *" $2 "*) return 0 ;; esac
	return 1
}

# The kernel-initiator VM group e2e_nvme runs beside e2e (and e2e_native
# after it)
# when both are asked for (SLATE_SERIAL_VMS=1: one after the other).
nvme_bg=0
beside e2e e2e_nvme && nvme_bg=1

# The rbd group (a throw-away Ceph cluster, tests/rbd/run.sh: libiscsi's
# whole suite in three shards beside the two-gateway and durability checks,
# mostly waiting on the cluster's round trips) runs beside e2e when both are
# asked for, like e2e_nvme (SLATE_SERIAL_VMS=1: on its own).
rbd_bg=0
beside e2e rbd && rbd_bg=1
# The fuzz group (CPU-bound, time-boxed per fuzzer) runs beside e2e_cross when
# both are asked for: the two VMs there leave part of the 2-core machine idle
# (they wait on guest timers and I/O), and the fuzzers, at nice 10, take that
# share rather than the guests'.  Each fuzzer still runs its corpus and
# FUZZ_SECS of fuzzing; its PASS line says how many inputs it ran.
# SLATE_SERIAL_VMS=1: on its own, after the others.
fuzz_bg=0
beside e2e_cross fuzz && fuzz_bg=1
# Prebuild: the clang libFuzzer build (build-fuzz/) and the Debian package
# (`make deb`, tests/package/run.sh --deb) are CPU work that only the fuzz and
# package groups need, and the groups after build mostly wait (on slated's
# round trips, libiscsi's sleeps, kill -9 and restarts).  When build is asked
# for with fuzz (or package), both build in the background after build.asan,
# one after the other at nice 10 (the tests' processes go first), and their
# result lines (build.fuzz, package.deb.build) are printed and counted before
# the first group that needs them: about 2 min off the serial path (bench/README.md,
# "make test time").  SLATE_SERIAL_VMS=1: in the build and package groups.
prebuild_fuzz=0 prebuild_deb=0 prebuild_pid= prebuilt=0
beside build fuzz && prebuild_fuzz=1
beside build package && prebuild_deb=1
# The package group (its linuxvm guest installs the prebuilt .deb and runs
# it under systemd) starts in the background as soon as the .deb is built,
# beside the light groups (limits .. service leave about half of the 2-core
# machine idle in event mode: bench/README.md "make test time"), instead of
# at the end of the run; the package line collects it.  Not at nice 10: at
# c52f6c3 it was, and beside the polling light groups and then the e2e VMs
# its guest took 10 minutes to boot and start slate.
package_bg=0 package_pid=
[ "$prebuild_deb" = 1 ] && package_bg=1
# The light groups (robust .. service: a slated on the host and its clients,
# mostly waiting on round trips, restarts and timers; the clean clone at
# 2e801bb had the 2-core machine half idle through them) run in two lanes:
# reload, durability and service one after the other in the background,
# started with the first of robust, robust_nvme, limits and metrics, which
# run in the foreground; the lane is collected before e2e.  Each group
# starts its own slated on ports of its own (port 0) in a state directory
# of its own.  SLATE_SERIAL_VMS=1: all in the foreground.
lane_b= lane_pid= lane_done=0
for g in reload durability service; do
	beside limits "$g" && lane_b+=" $g"
done
lane_cmd() { # group -> its command
	case $1 in
	reload) echo tests/reload/run.sh ;;
	durability) echo tests/durability/run.sh ;;
	service) echo tests/service/run.sh ;;
	esac
}
lane_start() {
	[ -n "$lane_b" ] && [ -z "$lane_pid" ] || return 0
	(
		for lg in $lane_b; do
			# shellcheck disable=SC2046
			bg_group "$lg" "$(gtimeout "$lg" 600)" $(lane_cmd "$lg")
		done
	) &
	lane_pid=$!
}
lane_collect() { # print and count the lane's groups, once
	[ -n "$lane_pid" ] && [ "$lane_done" = 0 ] || return 0
	lane_done=1
	wait "$lane_pid"
	for lg in $lane_b; do bg_collect "$lg" "$(gtimeout "$lg" 600)"; done
}
in_lane() { case " $lane_b " in *" $1 "*) return 0 ;; esac; return 1; }
prebuild_wait() { # print and count the prebuild's result lines, once
	[ -n "$prebuild_pid" ] && [ "$prebuilt" = 0 ] || return 0
	prebuilt=1
	wait "$prebuild_pid"
	[ "$prebuild_fuzz" = 1 ] && bg_collect build_fuzz "$(gtimeout build 1500)"
	[ "$prebuild_deb" = 1 ] && bg_collect package_deb "$(gtimeout package 1800)"
}

for g in $groups; do
	case $g in
	build)
		if [ "$prebuild_fuzz" = 1 ] || [ "$prebuild_deb" = 1 ]; then
			run_group build "$(gtimeout build 1500)" bash -c group_build_asan
			rm -f "$SLATE_LOGDIR/group-package_deb.rc"
			# the .deb first: the package VM waits for it, while the fuzz
			# build is needed only at e2e_cross
			(
				[ "$prebuild_deb" = 1 ] && bg_group package_deb "$(gtimeout package 1800)" nice -n 10 tests/package/run.sh --deb
				[ "$prebuild_fuzz" = 1 ] && bg_group build_fuzz "$(gtimeout build 1500)" nice -n 10 bash -c group_build_fuzz
			) &
			prebuild_pid=$!
			if [ "$package_bg" = 1 ]; then
				(
					# once package_deb has written its result (the prebuilt
					# .deb, none if that failed: the group builds it again)
					for _ in $(seq 900); do # (at most package_deb's 1800 s)
						[ -s "$SLATE_LOGDIR/group-package_deb.rc" ] && break
						sleep 2
					done
					PACKAGE_DEB=$(ls build-deb/slate_*_amd64.deb 2>/dev/null | head -n 1)
					export PACKAGE_DEB
					bg_group package "$(gtimeout package 1800)" tests/package/run.sh
				) &
				package_pid=$!
			fi
		else
			run_group build "$(gtimeout build 1500)" bash -c group_build
		fi
		;;
	unit) run_group unit "$(gtimeout unit 600)" bash -c group_unit ;;
	conformance) run_group conformance "$(gtimeout conformance 900)" tests/conformance/run.sh ;;
	robust)
		lane_start
		run_group robust "$(gtimeout robust 600)" tests/robust/run.sh
		;;
	robust_nvme)
		lane_start
		run_group robust_nvme "$(gtimeout robust_nvme 600)" tests/robust/nvme-tcp.sh
		;;
	limits) # chap, acl, tls, nop: ~40 s each on a loaded machine
		lane_start
		run_group limits "$(gtimeout limits 600)" tests/limits/run.sh
		;;
	metrics)
		lane_start
		run_group metrics "$(gtimeout metrics 600)" tests/metrics/run.sh
		;;
	reload | durability | service)
		# shellcheck disable=SC2046
		in_lane "$g" || run_group "$g" "$(gtimeout "$g" 600)" $(lane_cmd "$g")
		;;
	rbd) [ "$rbd_bg" = 1 ] || run_group rbd "$(gtimeout rbd 900)" tests/rbd/run.sh ;;
	e2e)
		lane_collect
		if [ "$rbd_bg" = 1 ]; then
			bg_group rbd "$(gtimeout rbd 900)" tests/rbd/run.sh &
			rbd_pid=$!
		fi
		if [ "$nvme_bg" = 1 ]; then
			bg_group e2e_nvme "$(gtimeout e2e_nvme 1500)" tests/e2e/nvme-linux.sh &
			nvme_pid=$!
		fi
		run_group e2e "$(gtimeout e2e 1200)" tests/e2e/iscsi-linux.sh
		if [ "$nvme_bg" = 1 ]; then
			# e2e_native (its own VM) after e2e, not after e2e_nvme: at
			# c52f6c3 e2e took 313 s, e2e_nvme 346 s and e2e_native 29 s
			bg_group e2e_native "$(gtimeout e2e_native 900)" tests/e2e/native-atomic.sh
			wait "$nvme_pid"
			bg_collect e2e_nvme "$(gtimeout e2e_nvme 1500)"
			bg_collect e2e_native "$(gtimeout e2e_native 900)"
		fi
		if [ "$rbd_bg" = 1 ]; then
			wait "$rbd_pid"
			bg_collect rbd "$(gtimeout rbd 900)"
		fi
		;;
	e2e_nvme)
		if [ "$nvme_bg" = 0 ]; then
			run_group e2e_nvme "$(gtimeout e2e_nvme 1500)" tests/e2e/nvme-linux.sh
			run_group e2e_native "$(gtimeout e2e_native 900)" tests/e2e/native-atomic.sh
		fi
		;;
	e2e_cross)
		if [ "$fuzz_bg" = 1 ]; then
			prebuild_wait
			bg_group fuzz "$(gtimeout fuzz 1200)" nice -n 10 bash -c group_fuzz &
			fuzz_pid=$!
		fi
		run_group e2e_cross "$(gtimeout e2e_cross 1500)" tests/e2e/cross-parallel.sh
		if [ "$fuzz_bg" = 1 ]; then
			wait "$fuzz_pid"
			bg_collect fuzz "$(gtimeout fuzz 1200)"
		fi
		;;
	package)
		if [ -n "$package_pid" ]; then
			prebuild_wait
			wait "$package_pid"
			bg_collect package "$(gtimeout package 1800)"
		elif [ "$prebuild_deb" = 1 ]; then
			prebuild_wait
			# the prebuilt .deb (none if that failed: the group builds it again)
			PACKAGE_DEB=$(ls build-deb/slate_*_amd64.deb 2>/dev/null | head -n 1)
			export PACKAGE_DEB
			run_group package "$(gtimeout package 1800)" tests/package/run.sh
			unset PACKAGE_DEB
		else
			run_group package "$(gtimeout package 1800)" tests/package/run.sh
		fi
		;;
	fuzz)
		prebuild_wait
		[ "$fuzz_bg" = 1 ] || run_group fuzz "$(gtimeout fuzz 1200)" bash -c group_fuzz
		;;
	*)
		slate_result FAIL "group.$g" "" "unknown group"
		nfail=$((nfail + 1))
		;;
	esac
done

lane_collect # (when e2e was not asked for)

if [ "$nfail" -gt 0 ]; then
	echo "failed: ${failed_names[*]}"
	echo "logs: $SLATE_LOGDIR"
fi
if [ "$nskip" -gt 0 ]; then
	echo "$npass passed, $nfail failed, $nskip skipped"
else
	echo "$npass passed, $nfail failed"
fi
[ "$nfail" = 0 ]
