#!/bin/bash
# tests/rbd/run.sh — the rbd backend against a throw-away Ceph cluster (issue 14).
#
# Starts one single-node cluster (tests/lib/ceph-cluster.sh: a monitor and a
# memstore OSD on loopback, under a temporary directory) for the whole group,
# then:
#  - rbd.cluster: the cluster came up (its start time and resident memory
#    are in the result line);
#  - rbd.identity / rbd.two-gateways.*: two slated processes export the same
#    image; both report the UUID stored in the image's metadata, and blocks
#    written through one (FUA and SYNCHRONIZE CACHE, tests/durability/durable.c)
#    read back through the other, both ways;
#  - rbd.resize.*: namespace_resize through one gateway grows the image and
#    the other follows, and both follow an `rbd resize` (the image's watch);
#  - rbd.durability.*: the durability rounds (kill -9 of slated with
#    acknowledged FUA / flushed writes, tests/durability/run.sh) on an image;
#  - rbd.conformance.*: libiscsi's iscsi-test-cu on an RBD-backed LUN 0
#    (tests/conformance/run.sh, CONF_BACKEND=rbd), the same expected skips as
#    the file-backed run plus tests/rbd/expected-skips.txt, on the suites
#    that reach the backend (RBD_CONF_FILTER, grep -E over the names, widens it).
# Then stops the cluster and removes its directory.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/../lib/ceph-cluster.sh"

logdir=$SLATE_LOGDIR/rbd
mkdir -p "$logdir"
fail=0
for b in ceph-mon ceph-osd ceph rbd; do
	command -v "$b" >/dev/null || {
		slate_result FAIL rbd.cluster "" "$b not installed (make deps-test: ceph-mon ceph-osd ceph-common)"
		exit 1
	}
done
if ! nm -D --undefined-only "$SLATE_BUILD/slated" 2>/dev/null | grep -q rbd_aio_writev &&
	! nm "$SLATE_BUILD/slated" 2>/dev/null | grep -q rbd_aio_writev; then
	slate_result FAIL rbd.build "" "slated built without librbd (librbd-dev, librados-dev)"
	exit 1
fi

work=$(mktemp -d /tmp/slate-rbd.XXXXXX)
cdir=$work/ceph
cleanup() {
	[ -n "${pid_b:-}" ] && kill -9 "$pid_b" 2>/dev/null
	slate_stop KILL >/dev/null 2>&1
	ceph_cluster_stop "$cdir"
	rm -rf "$work"
}
trap cleanup EXIT

if ! ceph_cluster_start "$cdir" conf "${RBD_CONF_SIZE_MIB:-64}M" shared 64M dur 64M >"$logdir/cluster.log" 2>&1; then
	cp "$cdir"/*.log "$logdir/" 2>/dev/null
	slate_result FAIL rbd.cluster "$logdir/cluster.log" "the cluster did not start"
	exit 1
fi
export CEPH_CONF
slate_result PASS rbd.cluster "" "started in $(cat "$cdir/start-seconds") s, $(($(ceph_cluster_rss "$cdir") / 1024)) MiB resident"

# --- two gateways on one image ---
durable=$SLATE_BUILD/tests/durable
gw_start() { # NAME -> config and state in $work/NAME
	local d=$work/$1
	mkdir -p "$d"
	slate_write_config "$d/slate.json" 0 rbd 0 shared
	slate_start "$d/run" "$d/slate.json" 0 "$logdir/$1.log"
}
size_of() { # STATEDIR -> the namespace's size in bytes as slated reports it
	"$SLATE_BUILD/slatectl" -s "$1/run/slated.sock" --json namespace_list 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["size"])' 2>/dev/null
}
uuid_of() { # STATEDIR -> the namespace's UUID as slated reports it
	"$SLATE_BUILD/slatectl" -s "$1/run/slated.sock" --json namespace_list 2>/dev/null |
		python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["uuid"])' 2>/dev/null
}
: >"$logdir/a.log"
: >"$logdir/b.log"
if gw_start a && url_a=$(slate_url "$SLATE_PORT") && pid_a=$SLATE_PID &&
	gw_start b && url_b=$(slate_url "$SLATE_PORT") && pid_b=$SLATE_PID; then
	SLATE_PID=$pid_a
	ua=$(uuid_of "$work/a")
	ub=$(uuid_of "$work/b")
	meta=$(rbd image-meta get slate/shared slate.identity 2>/dev/null)
	if [ -n "$ua" ] && [ "$ua" = "$ub" ] && [ "${meta%% *}" = "$ua" ]; then
		slate_result PASS rbd.identity
	else
		echo "a=$ua b=$ub image=$meta" >"$logdir/identity.log"
		slate_result FAIL rbd.identity "$logdir/identity.log" "gateways report different identities"
		fail=1
	fi
	j=$work/journal
	cross() { # NAME FROM-URL TO-URL GEN: written through one, read back through the other
		if "$durable" write -u "$2" -j "$j" -g "$4" -n 200 >"$logdir/$1.log" 2>&1 &&
			"$durable" verify -u "$3" -j "$j" >>"$logdir/$1.log" 2>&1; then
			slate_result PASS "rbd.two-gateways.$1"
		else
			slate_result FAIL "rbd.two-gateways.$1" "$logdir/$1.log" "written through one, not read back through the other"
			fail=1
		fi
	}
	cross a-to-b "$url_a" "$url_b" 1
	# The other way: the exclusive lock moves to b, a's cache must not serve old data.
	cross b-to-a "$url_b" "$url_a" 2
	# A resize through one gateway grows the image; the other follows (its
	# watch on the image header), as it follows an `rbd resize`.
	"$SLATE_BUILD/slatectl" -s "$work/a/run/slated.sock" namespace_resize name="$SLATE_NS" size=80M >"$logdir/resize.log" 2>&1
	for want in 83886080 100663296; do
		[ "$want" = 100663296 ] && rbd resize slate/shared --size 96M >>"$logdir/resize.log" 2>&1
		ok=0
		for _ in $(seq 50); do
			sa=$(size_of "$work/a") sb=$(size_of "$work/b")
			[ "$sa" = "$want" ] && [ "$sb" = "$want" ] && { ok=1; break; }
			sleep 0.1
		done
		echo "want $want: a=$sa b=$sb image=$(rbd info slate/shared --format json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" >>"$logdir/resize.log"
		if [ "$ok" = 1 ]; then
			slate_result PASS "rbd.resize.$want"
		else
			slate_result FAIL "rbd.resize.$want" "$logdir/resize.log" "the gateways did not both follow the image's size"
			fail=1
		fi
	done
else
	slate_result FAIL rbd.two-gateways "$logdir/a.log" "a gateway did not start on the image"
	fail=1
fi
kill -TERM "${pid_b:-}" 2>/dev/null
slate_stop >/dev/null 2>&1
wait "${pid_b:-}" 2>/dev/null
pid_b=
for g in a b; do
	if ! slate_sanitizer_clean "$logdir/$g.log"; then
		slate_result FAIL "rbd.two-gateways.$g.sanitizer" "$logdir/$g.log" "sanitizer report"
		fail=1
	fi
done

# --- kill -9 durability on an image (three of the file rounds, smaller) ---
DUR_ROUNDS='kill-fua-and-sync kill -g 1 -n 500
kill-mid-stream stream:3 -g 2 -n 10000000
clean-restart term -g 3 -n 200' \
	DUR_BACKEND=rbd DUR_DATA=dur DUR_NAME=rbd.durability "$here/../durability/run.sh" || fail=1

# --- libiscsi's suite on an RBD-backed LU ---
# The suites whose commands reach the backend in distinct ways (reads,
# writes, FUA, flushes, write zeroes / unmap, provisioning, sanitize,
# compare); the rest of the suite, and the same commands' other CDB sizes,
# test the SCSI and iSCSI layers, which do not know the backend (the file run
# covers them).  RBD_CONF_FILTER=. runs everything: 230 tests, about 7 min
# here by this set's 1.7 s per test, against about 2.5 min for this set.
filter=${RBD_CONF_FILTER:-'^ALL\.(Read10|Write10|Write16|WriteSame16|WriteVerify16|Verify16|CompareAndWrite|OrWrite|SyncCache10|Unmap|GetLBAStatus|Sanitize)\.'}
tests=$(iscsi-test-cu --list | grep -E '^ALL\.[^.]+\.[^.]+$' | grep -E "$filter" | grep -v 'Sanitize.Reset$')
CONF_TESTS=$tests CONF_BACKEND=rbd CONF_DATA=conf CONF_SIZE_MIB=0 CONF_SANITIZE_MIBPS=0 CONF_PLAIN=1 CONF_NAME=rbd.conformance \
	CONF_EXTRA_LUNS=0 CONF_SKIPS=$here/expected-skips.txt "$here/../conformance/run.sh" || fail=1
exit $fail
