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
#  - rbd.pr.*: a persistent reservation (SCSI, pr-probe) and an NVMe
#    reservation (ana_host.py resv) taken through one gateway are honoured
#    and reported by the other; racing registrations through both lose no
#    update (the state is a RADOS object, core/pr.c, rbd.c);
#  - rbd.atomic.*: atomic writes on the object path (core/atomic.c
#    CORE_ATOMIC_OBJECT, no journal): NVMe Writes and WRITE ATOMIC(16) in
#    flight when slated is killed -9 read back all old or all new through
#    the restarted gateway; WRITE ATOMIC(16) across an object is refused
#    without an ATOMIC BOUNDARY and split with one that divides the object
#    (rbd.atomic.object-boundary); Identify Namespace shows NAWUPF/NABSPF
#    (in rbd.ana.nvme-identify);
#  - rbd.crypt.*: the shared image is encrypted at rest (both gateways given
#    one key file; the wrapped key in the image metadata "slate.crypt", not
#    in either gateway's metadata file); a SANITIZE CRYPTOGRAPHIC ERASE
#    through a stores generation 1 there and b takes the new key before it
#    completes: the block written before reads zeroes through both (thin:
#    the erase deallocates, as on file), a block written after through b
#    reads back through a; no key, a wrong key, and encrypt=true on an
#    image that holds a plain namespace or imported data are refused
#    (core/ns.c crypt_with_data);
#  - rbd.durability.*: the durability rounds (kill -9 of slated with
#    acknowledged FUA / flushed writes, tests/durability/run.sh) on an image;
#  - rbd.conformance.*: libiscsi's whole iscsi-test-cu suite on RBD-backed
#    LUs (tests/conformance/run.sh, CONF_BACKEND=rbd), the same expected
#    skips as the file-backed run plus tests/rbd/expected-skips.txt, in
#    RBD_CONF_SHARDS (3) shards at once, each its own slated and image
#    (RBD_CONF_FILTER, grep -E over the names, narrows it).
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
# The libiscsi shards' images (below): 16 MiB each, as the conformance
# group's PI LUs (the smallest the suite runs on); every SANITIZE and GET LBA
# STATUS walks the whole image, a cluster round trip per 4 MiB object.
shards=${RBD_CONF_SHARDS:-3}
conf_images=
for s in $(seq "$shards"); do conf_images="$conf_images conf$s ${RBD_CONF_SIZE_MIB:-16}M"; done
# Sanitize.Reset's shard (below) has an image of its own.
reset_test=
if echo ALL.Sanitize.Reset | grep -qE "${RBD_CONF_FILTER:-.}" && iscsi-test-cu --list | grep -qx 'ALL.Sanitize.Reset'; then
	reset_test=ALL.Sanitize.Reset
	conf_images="$conf_images confreset 16M"
fi
cdir=$work/ceph
cleanup() {
	[ -n "${pid_b:-}" ] && kill -9 "$pid_b" 2>/dev/null
	local p
	for p in ${shard_pids[@]+"${shard_pids[@]}"}; do kill "$p" 2>/dev/null; done
	slate_stop KILL >/dev/null 2>&1
	ceph_cluster_stop "$cdir"
	rm -rf "$work"
}
trap cleanup EXIT

if ! ceph_cluster_start "$cdir" $conf_images shared 64M dur 64M atom 16M >"$logdir/cluster.log" 2>&1; then
	cp "$cdir"/*.log "$logdir/" 2>/dev/null
	slate_result FAIL rbd.cluster "$logdir/cluster.log" "the cluster did not start"
	exit 1
fi
export CEPH_CONF
slate_result PASS rbd.cluster "" "started in $(cat "$cdir/start-seconds") s, $(($(ceph_cluster_rss "$cdir") / 1024)) MiB resident"

# --- libiscsi's whole suite on RBD-backed LUs ---
# Every leaf test of iscsi-test-cu's ALL family (Sanitize.Reset in a shard
# of its own, below), as
# the file-backed run (tests/conformance/run.sh).  The tests wait on the
# cluster's round trips, not on the CPU, so they run in $shards shards at once,
# the names dealt round-robin (the slow ones are spread over the suites), each
# shard its own slated and image conf<N>.  They start here, beside the
# checks below (other images, other slated processes); their result lines
# come at the end, shard by shard.  Measured in
# bench/README.md ("The rbd group's libiscsi run").
# Not the PI LUs (CONF_PI=0): they are file and mem namespaces (rbd has no
# metadata store yet), which the conformance group already runs.  LUN 0 is
# encrypted at rest, as on file (the wrapped key in the image's metadata), so
# Sanitize.CryptoErase and the two libiscsi gates on it run here too.
# Nor the extra LUs (CONF_EXTRA_LUNS=0: write-protected, removable, 4 KiB
# physical), mem and file namespaces the conformance group runs.
tests=$(iscsi-test-cu --list | grep -E '^ALL\.[^.]+\.[^.]+$' | grep -E "${RBD_CONF_FILTER:-.}" | grep -v 'Sanitize.Reset$')
declare -a shard_tests shard_pids
n=0
for t in $tests; do
	shard_tests[n % shards]+="$t "
	n=$((n + 1))
done
for s in $(seq "$shards"); do
	CONF_TESTS=${shard_tests[s - 1]:-} CONF_BACKEND=rbd CONF_DATA=conf$s CONF_SIZE_MIB=0 CONF_SANITIZE_MIBPS=0 \
		CONF_NAME=rbd.conformance CONF_LOGDIR=$logdir/conformance$s CONF_SHARD=$s CONF_PI=0 CONF_EXTRA_LUNS=0 \
		CONF_SKIPS=$here/expected-skips.txt "$here/../conformance/run.sh" >"$work/conformance$s.out" 2>&1 &
	shard_pids[s]=$!
done
# Sanitize.Reset in a shard of its own, started with the others: libiscsi
# sleeps two minutes in it (sleep(60) twice), longer than a shard's share of
# the rest, so dealt into a shard it would make that one the group's tail.
# Its overwrite is paced at 2 MiB/s over the 16 MiB image (8 s), so the test
# still finds it running 4-5 s in, as the file run paces its 256 MiB LU.
if [ -n "$reset_test" ]; then
	CONF_TESTS=$reset_test CONF_BACKEND=rbd CONF_DATA=confreset CONF_SIZE_MIB=0 CONF_SANITIZE_MIBPS=2 CONF_PLAIN=1 \
		CONF_NAME=rbd.conformance CONF_LOGDIR=$logdir/conformance-reset CONF_SHARD=reset CONF_PI=0 CONF_EXTRA_LUNS=0 \
		CONF_SKIPS=$here/expected-skips.txt "$here/../conformance/run.sh" >"$work/conformancereset.out" 2>&1 &
	shard_pids[0]=$!
fi

# --- several gateways, one namespace: ANA and ALUA (core/ana.h), ~3 s ---
# Gateway a (gateway_id 1) keeps group 1 optimized, b (gateway_id 2) makes it
# non-optimized; both export the image as NSID 1 of one NVMe subsystem too.
# A raw NVMe/TCP host (ana_host.py) and a libiscsi host (alua-probe) read
# through each gateway what a multipath host reads: distinct CNTLIDs, relative
# port ids and target port groups, one NGUID, each gateway's own state (log
# 0Ch with and without RGO, RTPG in both formats); then a state change on b
# reaches connected hosts (the ANA change notice, UA 2Ah/06h) and I/O through
# b fails with the path status a host fails over on (NVMe 3h/02h, NOT READY
# 04h/0Ch) while a still serves it.  The data claim (one image, both
# gateways) is rbd.two-gateways.*'s.
ana_nqn=nqn.2026-12.io.slate:rbd-shared
ctl() { "$SLATE_BUILD/slatectl" -s "$work/$1/run/slated.sock" "${@:2}"; }
ana_checks() {
	local g port log=$logdir/ana.log
	declare -A nport
	: >"$log"
	for g in a b; do
		ctl $g nvmf_subsystem_create nqn=$ana_nqn >>"$log" 2>&1
		ctl $g nvmf_ns_attach nqn=$ana_nqn nsid=1 namespace="$SLATE_NS" >>"$log" 2>&1
		ctl $g nvmf_listener_add addr=127.0.0.1 port=0 >>"$log" 2>&1
		nport[$g]=$(ctl $g --json nvmf_listener_list 2>>"$log" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["port"])' 2>>"$log")
	done
	ctl b ana_group_set group=1 state=non-optimized >>"$log" 2>&1
	python3 "$here/ana_host.py" info "${nport[a]}" $ana_nqn >"$work/nvme-a.json" 2>>"$log"
	python3 "$here/ana_host.py" info "${nport[b]}" $ana_nqn >"$work/nvme-b.json" 2>>"$log"
	"$SLATE_BUILD/tests/alua-probe" "$url_a" >"$work/scsi-a.json" 2>>"$log"
	"$SLATE_BUILD/tests/alua-probe" "$url_b" >"$work/scsi-b.json" 2>>"$log"
	ana_verdict() { # NAME PYTHON-EXPRESSION over a, b (NVMe) and sa, sb (SCSI)
		if python3 - "$work" "$2" >>"$log" 2>&1 <<'PY'; then
import json, sys
w, expr = sys.argv[1], sys.argv[2]
ld = lambda n: json.loads(open("%s/%s.json" % (w, n)).read().splitlines()[0])
a, b, sa, sb = ld("nvme-a"), ld("nvme-b"), ld("scsi-a"), ld("scsi-b")
print(expr, "->", eval(expr))
sys.exit(0 if eval(expr) else 1)
PY
			slate_result PASS "rbd.ana.$1"
		else
			slate_result FAIL "rbd.ana.$1" "$log" "$2"
			fail=1
		fi
	}
	# NVMe: CMIC bit 3, every ANACAP state, distinct CNTLIDs in each gateway's
	# range, one NGUID, ANAGRPID 1 and each gateway's own state (01h, 02h)
	# and atomic writes on the object path (atomic_write_max 64K): NSABP, NAWUN =
	# NAWUPF = 127 (0's based), NACWU 0, the 4 MiB object the boundary (NABSN =
	# NABSPF = 8191), NABO 0 (what Linux needs for RWF_ATOMIC), on both gateways
	ana_verdict nvme-identify 'a["cmic"] & 8 and a["anacap"] & 0x1f == 0x1f and a["oaes"] & 0x800 and a["mnan"] > 0 and a["anagrpid"] == b["anagrpid"] == 1 and a["nsfeat"] & 2 and a["atomic"] == b["atomic"] == [127, 127, 0, 8191, 0, 8191]'
	ana_verdict nvme-cntlid 'a["cntlid"] >> 12 == 1 and b["cntlid"] >> 12 == 2 and a["nguid"] == b["nguid"]'
	ana_verdict nvme-ana-log 'a["log"]["groups"] == [dict(grpid=1, state=1, chgcnt=0, nsids=[1])] and [(g["grpid"], g["state"], g["nsids"]) for g in b["log"]["groups"]] == [(1, 2, [1])] and [(g["grpid"], g["state"], g["nsids"]) for g in b["log_rgo"]["groups"]] == [(1, 2, [])] and b["log"]["chgcnt"] >= 1'
	# SCSI: implicit ALUA, distinct relative ports and groups, the states
	ana_verdict scsi-rtpg 'sa["tpgs"] == sb["tpgs"] == 1 and sa["vpd_relport"] >> 8 == 1 and sb["vpd_relport"] >> 8 == 2 and sa["vpd_tpg"] == sa["tpg"] == sa["ext_tpg"] != sb["vpd_tpg"] == sb["tpg"] == sb["ext_tpg"] and sa["port"] == sa["vpd_relport"] and sb["port"] == sb["vpd_relport"] and (sa["state"], sb["state"], sb["ext_state"]) == (0, 1, 1) and sa["read"] == sb["read"] == 0'
	# A change reaches hosts connected to b: group 1 becomes inaccessible there.
	python3 "$here/ana_host.py" aen "${nport[b]}" $ana_nqn >"$work/nvme-b-aen.json" 2>>"$log" &
	local hp=$!
	"$SLATE_BUILD/tests/alua-probe" "$url_b" 10 >"$work/scsi-b-ua.json" 2>>"$log" &
	local sp=$!
	for _ in $(seq 100); do # both connected, the AER posted
		grep -q READY "$work/nvme-b-aen.json" 2>/dev/null &&
			grep -q READY "$work/scsi-b-ua.json" 2>/dev/null && break
		sleep 0.1
	done
	ctl b ana_group_set group=1 state=inaccessible >>"$log" 2>&1
	wait $hp $sp
	grep -v READY "$work/nvme-b-aen.json" >"$work/nvme-b.json"
	grep -v READY "$work/scsi-b-ua.json" | tail -n 1 >"$work/scsi-b.json"
	"$SLATE_BUILD/tests/alua-probe" "$url_a" >"$work/scsi-a.json" 2>>"$log"
	# the ANA change notice (type 2h, info 03h, log 0Ch), the new state 03h, a Read
	# failing with Asymmetric Access Inaccessible (SCT 3h SC 02h, M set) through b
	ana_verdict nvme-change 'b["aen"] == 0x0c0302 and [(g["grpid"], g["state"]) for g in b["log_after"]["groups"]] == [(1, 3)] and b["read_status_after"] & 0x7ff == 0x302 and b["read_status"] == 0'
	# UNIT ATTENTION 2Ah/06h, then unavailable (3h) and NOT READY 04h/0Ch through
	# b; a still reads
	ana_verdict scsi-change 'sb["ua"] == 0x62a06 and sb["state_after"] == 3 and sb["read_after"] == 0x2040c and sa["read"] == 0 and sa["state"] == 0'
	ctl b ana_group_set group=1 state=optimized >>"$log" 2>&1
}

# --- persistent reservations across gateways (core/pr.c, rbd.c's slate.pr.<image id>), ~3 s ---
# pr-probe (libiscsi, fixed ISIDs) is the sg_persist of each host.  Host 1
# registers through a for all target ports and reserves Write Exclusive;
# through b, an unregistered host 2's write conflicts before any PR IN there
# (b's copy came by the notify, acknowledged before a completed the PR OUT)
# and its read does not, and PR IN shows a's
# key and reservation; 8 hosts, 4 through each gateway, register and then
# replace their key 10 times, all at once (no update lost: the stores that
# lost a race and were applied again are counted); a host registered through
# a's port is not through b's; host 1 releases through b (ALL_TG_PT makes it
# the holder there) and a follows: host 2 writes through a.
pr_checks() {
	local log=$logdir/pr.log probe=$SLATE_BUILD/tests/pr-probe n
	local h=iqn.2026-12.io.slate:pr-host pids=()
	: >"$log"
	"$probe" "$url_a" ${h}1 regall:aa reserve:aa:1 write resv >"$work/pr1.json" 2>>"$log"
	"$probe" "$url_b" ${h}2 write read keys resv full >"$work/pr2.json" 2>>"$log"
	for n in 1 2 3 4; do
		"$probe" "$url_a" ${h}-a$n reg:a${n}00 rereg:a${n}00:10 >"$work/pr-race-a$n.json" 2>>"$log" &
		pids+=($!)
		"$probe" "$url_b" ${h}-b$n reg:b${n}00 rereg:b${n}00:10 >"$work/pr-race-b$n.json" 2>>"$log" &
		pids+=($!)
	done
	wait "${pids[@]}"
	"$probe" "$url_b" ${h}1 write release:aa:1 >"$work/pr3.json" 2>>"$log"
	"$probe" "$url_b" ${h}-a1 reg:c1 >"$work/pr5.json" 2>>"$log"
	"$probe" "$url_a" ${h}2 write resv keys full >"$work/pr4.json" 2>>"$log"
	local retried
	retried=$(cat "$logdir/a.log" "$logdir/b.log" | grep -c 'another gateway changed the reservation state first')
	# One python for every verdict (a python start costs seconds on a loaded machine):
	# NAME<TAB>EXPRESSION over p1..p5 and race (the 8 racers' output) per line.
	python3 - "$work" >"$work/pr-verdicts" 2>>"$log" <<'PY'
import glob, json, sys
w = sys.argv[1]
ld = lambda n: json.load(open("%s/%s.json" % (w, n)))
try:
    p1, p2, p3, p4, p5 = ld("pr1"), ld("pr2"), ld("pr3"), ld("pr4"), ld("pr5")
    race = [json.load(open(f)) for f in sorted(glob.glob(w + "/pr-race-*.json"))]
except Exception as e:
    p1 = p2 = p3 = p4 = p5 = race = None
    print("probe output unreadable:", e, file=sys.stderr)
checks = [
    ("reserve", 'p1[:3] == [0, 0, 0] and (p1[3]["key"], p1[3]["type"]) == ("aa", 1)'),
    # RESERVATION CONFLICT (18h) for the write through b, GOOD for the read
    ("honoured-by-other", 'p2[0] == 0x1000018 and p2[1] == 0'),
    ("seen-by-other", 'p2[2]["keys"] == ["aa"] and (p2[3]["key"], p2[3]["type"]) == ("aa", 1) and '
     '[(r["key"], r["holder"], r["all_tg_pt"]) for r in p2[4]["regs"]] == [("aa", 1, 1)]'),
    # 10 registrations, each of the 8 racers' with its last key, PRgeneration 1 + 8 x 11 + 1:
    # no change lost to a race between the gateways
    ("no-lost-update", 'race == [[0, 0]] * 8 and sorted(p4[2]["keys"]) == sorted(["aa", "c1"] + '
     '["%s%d0a" % (g, i) for g in "ab" for i in range(1, 5)]) and p4[2]["gen"] == 90'),
    # a host registered through a's port is not registered through b's (c1 is a new
    # registration, not a conflict with a1); READ FULL STATUS names each registration's
    # port, the gateway id in its high byte
    ("target-ports", 'p5 == [0] and sorted((r["key"][0], r["rtp"] >> 8) for r in p4[3]["regs"] '
     'if r["key"] != "aa") == sorted([("a", 1)] * 4 + [("b", 2)] * 4 + [("c", 2)])'),
    ("release-seen", 'p3 == [0, 0] and p4[0] == 0 and p4[1]["type"] == 0'),
]
print("output:", p1, p2, p3, p4, p5, race, file=sys.stderr)
for name, expr in checks:
    try:
        ok = bool(eval(expr))
    except Exception:
        ok = False
    print("%s\t%s\t%s" % ("PASS" if ok else "FAIL", name, expr))
PY
	local st name expr
	while IFS=$'\t' read -r st name expr; do
		if [ "$st" = PASS ]; then
			[ "$name" = no-lost-update ] && expr="$retried stores retried after a lost race" || expr=
			slate_result PASS "rbd.pr.$name" "" "$expr"
		else
			slate_result FAIL "rbd.pr.$name" "$log" "$expr"
			fail=1
		fi
	done <"$work/pr-verdicts"
	[ "$(grep -c . "$work/pr-verdicts")" = 6 ] || { slate_result FAIL rbd.pr.verdicts "$log" "the verdicts did not run"; fail=1; }
	"$probe" "$url_a" ${h}1 clear:aa >>"$log" 2>&1 # the other groups find no registrations
}

# The same through NVMe (ana_host.py resv: Reservation Register/Acquire/
# Release/Report), on the subsystem ana_checks made: host 1 registers and
# acquires Write Exclusive through a; through b, host 2's write fails with
# Reservation Conflict (83h) and its read does not, and the report shows the
# key held; host 1 releases through b (an NVMe registrant is the host, on
# every controller) and host 2 writes through a.
nvme_pr_checks() {
	local log=$logdir/pr.log g
	declare -A nport
	for g in a b; do
		nport[$g]=$(ctl $g --json nvmf_listener_list 2>>"$log" | grep -o '"port": *[0-9]*' |
			head -n 1 | grep -o '[0-9]*$')
	done
	python3 "$here/ana_host.py" resv "${nport[a]}" $ana_nqn 1 reg:1aa acq:1aa:1 write \
		+ "${nport[b]}" 2 write read report + "${nport[b]}" 1 rel:1aa:1 \
		+ "${nport[a]}" 2 write report + "${nport[a]}" 1 clr:1aa >"$work/npr.json" 2>>"$log"
	if python3 - "$work" >>"$log" 2>&1 <<'PY'; then
import json, sys
p1, p2, p3, p4, p5 = [json.loads(l) for l in open(sys.argv[1] + "/npr.json")]
print("nvme", p1, p2, p3, p4, p5)
ok = (p1 == [0, 0, 0] and p2[0] & 0x7ff == 0x83 and p2[1] == 0 and p2[2]["rtype"] == 1 and
      p2[2]["regs"] == [["1aa", 1]] and p3 == [0] and p4[0] == 0 and
      p4[1]["rtype"] == 0 and p4[1]["regs"] == [["1aa", 0]] and p5 == [0])
sys.exit(0 if ok else 1)
PY
		slate_result PASS rbd.pr.nvme
	else
		slate_result FAIL rbd.pr.nvme "$log" "an NVMe reservation through a not honoured or not seen through b"
		fail=1
	fi
}

# --- encryption at rest on the shared image (core/ns.c crypt_with_data), ~3 s ---
crypt_checks() {
	local log=$logdir/crypt.log probe=$SLATE_BUILD/tests/pr-probe h=iqn.2026-12.io.slate:crypt-host
	: >"$log"
	local before after
	before=$(rbd image-meta get slate/shared slate.crypt 2>>"$log")
	"$probe" "$url_a" ${h}1 write data >"$work/crypt1.json" 2>>"$log"
	"$probe" "$url_b" ${h}2 data >"$work/crypt2.json" 2>>"$log"
	"$probe" "$url_a" ${h}1 crypto-erase data >"$work/crypt3.json" 2>>"$log"
	"$probe" "$url_b" ${h}2 data write >"$work/crypt4.json" 2>>"$log"
	"$probe" "$url_a" ${h}1 data >"$work/crypt5.json" 2>>"$log"
	after=$(rbd image-meta get slate/shared slate.crypt 2>>"$log")
	# Refused: no key, a wrong key, encrypt=true over a plain namespace's image.
	(umask 077 && head -c 32 /dev/urandom >"$work/wrong.key")
	rbd create slate/plain --size 8M >>"$log" 2>&1
	local cp="backend=rbd pool=slate ceph_conf=$CEPH_CONF block_size=512"
	ctl a namespace_create name=c-nokey $cp image=shared >"$work/crypt-nokey.out" 2>&1
	ctl a namespace_create name=c-wrong $cp image=shared key_file="$work/wrong.key" >"$work/crypt-wrong.out" 2>&1
	ctl a namespace_create name=c-plain $cp image=plain >>"$log" 2>&1
	ctl a namespace_delete name=c-plain >>"$log" 2>&1
	ctl b namespace_create name=c-plain2 $cp image=plain encrypt=true key_file="$work/crypt.key" >"$work/crypt-plain.out" 2>&1
	head -c 1M /dev/urandom >"$work/import.bin"
	rbd import "$work/import.bin" slate/imported >>"$log" 2>&1
	ctl b namespace_create name=c-imported $cp image=imported encrypt=true key_file="$work/crypt.key" >"$work/crypt-imported.out" 2>&1
	cat "$work"/crypt-*.out >>"$log"
	{ echo "before: $before"; echo "after: $after"; } >>"$log"
	python3 - "$work" "$before" "$after" "$SLATE_NS" >"$work/crypt-verdicts" 2>>"$log" <<'PY'
import glob, json, sys
w, before, after = sys.argv[1], sys.argv[2], sys.argv[3]
ld = lambda n: json.load(open("%s/%s.json" % (w, n)))
rd = lambda n: open("%s/%s.out" % (w, n)).read()
try:
    c1, c2, c3, c4, c5 = ld("crypt1"), ld("crypt2"), ld("crypt3"), ld("crypt4"), ld("crypt5")
    b, a = json.loads(before), json.loads(after)
    metas = glob.glob(w + "/[ab]/**/%s.meta.json" % sys.argv[4], recursive=True)
    meta = "".join(open(f).read() for f in metas) if len(metas) == 2 else ""
except Exception as e:
    c1 = c2 = c3 = c4 = c5 = b = a = None
    meta = ""
    print("probe output unreadable:", e, file=sys.stderr)
print("output:", c1, c2, c3, c4, c5, b, a, file=sys.stderr)
checks = [
    # the wrapped key kept with the image (generation 0), not in the gateways' metadata files
    ("record", 'b["cipher"] == "aes-256-xts" and b["kek"] == "key_file" and len(b["wrapped_key"]) == 144 and b["erasures"] == 0 and "wrapped_key" not in meta and meta'),
    ("cross-read", 'c1 == [0, {"status": 0, "zero": 0, "written": 1}] and c2 == [{"status": 0, "zero": 0, "written": 1}]'),
    # generation 1, a new wrapped key; the block written before reads zeroes through both
    ("erase", 'c3 == [0, {"status": 0, "zero": 1, "written": 0}] and a["erasures"] == 1 and a["wrapped_key"] != b["wrapped_key"] and a["salt"] == b["salt"]'),
    ("erase-seen-by-other", 'c4[0] == {"status": 0, "zero": 1, "written": 0}'),
    ("new-key-shared", 'c4[1] == 0 and c5 == [{"status": 0, "zero": 0, "written": 1}]'),
    ("no-key-refused", '"is encrypted" in rd("crypt-nokey") and "give key_file" in rd("crypt-nokey")'),
    ("wrong-key-refused", '"wrong key" in rd("crypt-wrong")'),
    ("plain-refused", '"exists unencrypted" in rd("crypt-plain")'),
    # data Slate did not write (rbd import): would read as garbage, as a non-empty file
    ("data-refused", '"holds data" in rd("crypt-imported")'),
]
for name, expr in checks:
    try:
        ok = bool(eval(expr))
    except Exception:
        ok = False
    print("%s\t%s\t%s" % ("PASS" if ok else "FAIL", name, expr))
PY
	local st name expr
	while IFS=$'\t' read -r st name expr; do
		if [ "$st" = PASS ]; then
			slate_result PASS "rbd.crypt.$name"
		else
			slate_result FAIL "rbd.crypt.$name" "$log" "$expr"
			fail=1
		fi
	done <"$work/crypt-verdicts"
	[ "$(grep -c . "$work/crypt-verdicts")" = 9 ] || { slate_result FAIL rbd.crypt.verdicts "$log" "the verdicts did not run"; fail=1; }
	grep -h 'data key' "$logdir/a.log" "$logdir/b.log" >>"$log"
}

# --- two gateways on one image ---
durable=$SLATE_BUILD/tests/durable
gw_start() { # NAME GATEWAY_ID -> config and state in $work/NAME
	local d=$work/$1
	mkdir -p "$d"
	SLATE_ATOMIC_MAX=64K SLATE_OPTIONS="\"gateway_id\": $2" SLATE_NS_EXTRA="\"encrypt\": true, \"key_file\": \"$work/crypt.key\"" \
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
(umask 077 && head -c 32 /dev/urandom >"$work/crypt.key")
if gw_start a 1 && url_a=$(slate_url "$SLATE_PORT") && pid_a=$SLATE_PID &&
	gw_start b 2 && url_b=$(slate_url "$SLATE_PORT") && pid_b=$SLATE_PID; then
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
	pr_checks
	ana_checks
	nvme_pr_checks
	crypt_checks
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

# --- atomic writes on an image: kill -9 mid-stream, ~15 s a round ---
# The object path (core/atomic.c CORE_ATOMIC_OBJECT): no journal, a write
# inside one RADOS object is one OSD op.  Two NVMe writers (every Write of
# 2..128 blocks fits NAWUPF) and two iSCSI writers (WRITE ATOMIC(16), one in
# ten beyond the limits and refused) of tests/durability/atomic_crash.c,
# each in its own 2 MiB region of image atom (its 4 MiB objects hold two
# regions each: no write crosses an object), until slated is killed -9 at
# a random moment; then a new slated opens the image (breaking the dead
# one's lock) and the verifier reads every region back: the write each
# writer had in flight must be all old or all new.  RBD_ATOMIC_ROUNDS
# rounds (default 1, ~15 s; bench/crash-style campaigns: more).  Writes
# acknowledged and then lost are counted, not failed: the librbd cache
# (writearound) may acknowledge a write before the OSD has it, as a disk
# with a volatile cache (VWC) may; until the first flush librbd writes
# through, and these writers send none.
atomic_checks() {
	local d=$work/atom log=$logdir/atomic.log bin=$SLATE_BUILD/tests/atomic-crash
	local nqn=nqn.2026-12.io.slate:rbd-atomic region=4096 max=128 n w p r out rc torn lost acked probe=
	local journals=() pids
	mkdir -p "$d"
	: >"$log"
	cat >"$d/slate.json" <<JSON
{"options":{"allowed_dirs":["$(dirname "$CEPH_CONF")"]},"config":[
 {"method":"namespace_create","params":{"name":"atom","backend":"rbd","pool":"slate","image":"atom","ceph_conf":"$CEPH_CONF","size":"0M","block_size":512,"atomic_write_max":"64K"}},
 {"method":"nvmf_subsystem_create","params":{"nqn":"$nqn"}},
 {"method":"nvmf_subsystem_add_host","params":{"nqn":"$nqn","host":"*"}},
 {"method":"nvmf_ns_attach","params":{"nqn":"$nqn","nsid":1,"namespace":"atom"}},
 {"method":"iscsi_target_create","params":{"name":"$SLATE_IQN"}},
 {"method":"iscsi_lun_map","params":{"target":"$SLATE_IQN","lun":0,"namespace":"atom"}},
 {"method":"iscsi_portal_add","params":{"addr":"127.0.0.1","port":0}},
 {"method":"nvmf_listener_add","params":{"addr":"127.0.0.1","port":0}}
]}
JSON
	for w in 0 1 2 3; do journals+=(-j "$d/writer$w.log"); done
	for n in $(seq "${RBD_ATOMIC_ROUNDS:-1}"); do
		echo "--- round $n ---" >>"$log"
		if ! slate_start "$d/run" "$d/slate.json" 0 "$logdir/atomic-slated.log"; then
			slate_result FAIL "rbd.atomic.crash-$n" "$logdir/atomic-slated.log" "slated did not start on the image"
			fail=1
			return
		fi
		grep -q 'namespace atom: atomic writes: object, up to 65536 bytes' "$logdir/atomic-slated.log" ||
			echo "no object path in the slated log" >>"$log"
		pids=()
		for w in 0 1; do
			"$bin" write -p "$SLATE_NVME_PORT" -n "$nqn" -w $w -j "$d/writer$w.log" -r $region -m $max >>"$log" 2>&1 &
			pids+=($!)
		done
		for w in 2 3; do
			"$bin" write -u "$(slate_url "$SLATE_PORT")" -w $w -j "$d/writer$w.log" -r $region -m $max >>"$log" 2>&1 &
			pids+=($!)
		done
		sleep "$((RANDOM % 2 + 1)).$((RANDOM % 10))"
		slate_stop KILL >/dev/null 2>&1
		rc=0
		for p in "${pids[@]}"; do
			wait "$p"
			r=$?
			# 3: could not connect before the kill (checks nothing, not a failure);
			# 2/4: an I/O error, a write beyond the limits not refused, no WRITE ATOMIC
			[ $r != 0 ] && [ $r != 3 ] && rc=$r
		done
		if ! slate_start "$d/run" "$d/slate.json" 0 "$logdir/atomic-slated.log"; then
			slate_result FAIL "rbd.atomic.crash-$n" "$logdir/atomic-slated.log" "slated did not restart on the image"
			fail=1
			return
		fi
		out=$(timeout 120 "$bin" verify -p "$SLATE_NVME_PORT" -n "$nqn" "${journals[@]}" -r $region -m $max 2>>"$log")
		r=$?
		echo "$out" >>"$log"
		# Across the object boundary at 12 MiB (LBA 24576, beyond the writers'
		# regions), WRITE ATOMIC(16) of 16 blocks: without ATOMIC BOUNDARY
		# refused (ILLEGAL REQUEST, INVALID FIELD IN CDB: 5h/24h/00h), with a
		# boundary of 8 (divides the object: split there) GOOD, with 96 (does
		# not) refused; inside one object GOOD.
		[ "$n" = 1 ] && probe=$(timeout 60 "$bin" probe -u "$(slate_url "$SLATE_PORT")" \
			24568:16:0 24568:16:8 24568:16:96 24560:16:0 2>>"$log")
		slate_stop >/dev/null 2>&1
		torn=$(echo "$out" | sed -n 's/^torn \([0-9]*\) lost \([0-9]*\)$/\1/p')
		lost=$(echo "$out" | sed -n 's/^torn \([0-9]*\) lost \([0-9]*\)$/\2/p')
		acked=$(cat "$d"/writer*.log | grep -c '^A ')
		if [ "$rc" = 0 ] && [ "$torn" = 0 ] && [ -n "$lost" ] && [ $r -lt 2 ] && [ "$acked" -gt 0 ]; then
			slate_result PASS "rbd.atomic.crash-$n" "" "$acked atomic writes acknowledged so far, torn 0, lost $lost"
		else
			slate_result FAIL "rbd.atomic.crash-$n" "$log" "writers rc $rc, verify rc $r: ${out:-no verdict}"
			fail=1
		fi
	done
	echo "boundary probe: ${probe:-}" >>"$log"
	if [ "${probe:-}" = "0x52400 0x0 0x52400 0x0" ]; then
		slate_result PASS rbd.atomic.object-boundary
	else
		slate_result FAIL rbd.atomic.object-boundary "$log" "WRITE ATOMIC(16) across an object: got '${probe:-}', want '0x52400 0x0 0x52400 0x0'"
		fail=1
	fi
	slate_sanitizer_clean "$logdir/atomic-slated.log" ||
		{ slate_result FAIL rbd.atomic.sanitizer "$logdir/atomic-slated.log" "sanitizer report"; fail=1; }
}
atomic_checks

# --- kill -9 durability on an image (three of the file rounds, smaller) ---
DUR_ROUNDS='kill-fua-and-sync kill -g 1 -n 500
kill-mid-stream stream:3 -g 2 -n 10000000
clean-restart term -g 3 -n 200' \
	DUR_BACKEND=rbd DUR_DATA=dur DUR_NAME=rbd.durability "$here/../durability/run.sh" || fail=1

# --- the libiscsi shards (started after the cluster) ---
for s in $(seq "$shards") ${reset_test:+reset}; do
	wait "${shard_pids[$([ "$s" = reset ] && echo 0 || echo "$s")]}" || fail=1
	cat "$work/conformance$s.out"
done
exit $fail
