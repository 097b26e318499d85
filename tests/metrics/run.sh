#!/bin/bash
# tests/metrics/run.sh — the metrics endpoint and the status page against a
# live slated (ASan), with real clients: Prometheus's promtool parses and
# lints /metrics; libiscsi (tests/metrics/metrics_io.c) and slate-perf's
# NVMe/TCP initiator run known workloads whose counts must show exactly;
# Debian's chromium loads the status page headless under load and must plot
# data, and must make no request anywhere but slated.  One PASS/FAIL line
# per check (slate_check); logs in $SLATE_LOGDIR/metrics/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

logdir=$SLATE_LOGDIR/metrics
mkdir -p "$logdir"
SLATE_LOGDIR=$logdir
io=$SLATE_BUILD/tests/metrics-io
perf=$SLATE_BUILD/tools/slate-perf/slate-perf
ctl=$SLATE_BUILD/slatectl
for b in "$io" "$perf" "$ctl"; do
	[ -x "$b" ] || {
		slate_result FAIL metrics.build "" "$b not built"
		exit 1
	}
done
for b in promtool chromium curl python3; do
	command -v "$b" >/dev/null || {
		slate_result FAIL "metrics.$b" "" "$b not installed (make deps-test)"
		exit 1
	}
done

NQN=nqn.2026-12.io.slate:metrics
INI=iqn.2026-12.io.slate:metrics-io
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:5eed0000-0000-4000-8000-00000000beef
state=$(mktemp -d /tmp/slate-metrics.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; [ -n "${load_pid:-}" ] && kill "$load_pid" 2>/dev/null; rm -rf "$state"' EXIT
daemon_log=$logdir/slated.log
: >"$daemon_log"

write_config() { # FILE [OPTIONS-JSON]
	# the thin namespace's file lies beside the config, outside the state dir: allowed_dirs
	local inner=
	[ -n "${2:-}" ] && inner=", ${2#\{}" && inner=${inner%\}}
	local opts="\"options\": {\"allowed_dirs\": [\"$state\"]$inner},"
	cat >"$1" <<JSON
{$opts "config": [
  {"method": "namespace_create", "params": {"name": "$SLATE_NS", "backend": "mem", "size": "64M", "block_size": 512}},
  {"method": "namespace_create", "params": {"name": "thin0", "backend": "file", "path": "${1%.json}-thin0.img", "size": "64M"}},
  {"method": "iscsi_target_create", "params": {"name": "$SLATE_IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 0, "namespace": "$SLATE_NS"}},
  {"method": "iscsi_lun_map", "params": {"target": "$SLATE_IQN", "lun": 1, "namespace": "thin0"}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$NQN"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$NQN", "nsid": 1, "namespace": "$SLATE_NS"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
}

# --- off unless configured --------------------------------------------------
off_by_default() {
	write_config "$state/off.json"
	slate_start "$state/off" "$state/off.json" 0 "$daemon_log" || return 1
	local st
	st=$("$ctl" -s "$state/off/slated.sock" --json daemon_status)
	echo "$st"
	slate_stop
	[ -z "$SLATE_HTTP_PORT" ] && ! echo "$st" | grep -q '"http"'
}
slate_check metrics off-by-default off_by_default

# --- bad listen addresses get a clear error, not a daemon ----------------------
refuses() { # EXPECTED-MESSAGE slated-args...
	local want=$1 out rc
	shift
	out=$(timeout 30 "$SLATE_BUILD/slated" --state-dir "$state/bad" "$@" 2>&1)
	rc=$?
	echo "exit $rc: $out"
	[ "$rc" = 1 ] && echo "$out" | grep -q -- "$want"
}
bad_listen() {
	write_config "$state/bad-opt.json" '{"http_listen": "1.2.3.4.5:80"}'
	refuses 'options.http_listen must be' -c "$state/bad-opt.json" &&
		write_config "$state/bad.json" &&
		refuses "want PORT, ADDR:PORT" -c "$state/bad.json" --http 'localhost:x' &&
		refuses "want PORT, ADDR:PORT" -c "$state/bad.json" --http '127.0.0.1:65536' &&
		refuses "want PORT, ADDR:PORT" -c "$state/bad.json" --http '::1:80'
}
slate_check metrics bad-listen bad_listen

# --- the daemon under test -----------------------------------------------------
write_config "$state/slate.json" '{"http_listen": "127.0.0.1:0"}'
if ! slate_start "$state/run" "$state/slate.json" 0 "$daemon_log" || [ -z "$SLATE_HTTP_PORT" ]; then
	slate_result FAIL metrics.start "$daemon_log" "slated did not start with its HTTP server"
	exit 1
fi
url=http://127.0.0.1:$SLATE_HTTP_PORT
iport=$SLATE_PORT
nport=$SLATE_NVME_PORT

port0() {
	echo "log: $SLATE_HTTP_PORT"
	"$ctl" -s "$state/run/slated.sock" --json daemon_status | tee "$state/ds.json"
	[ "$SLATE_HTTP_PORT" != 0 ] &&
		python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d["http"]["port"] != int(sys.argv[2]) or d["http"]["addr"] != "127.0.0.1")' \
			"$state/ds.json" "$SLATE_HTTP_PORT" &&
		curl -sf "$url/metrics" >/dev/null
}
slate_check metrics port0-reported port0

# A port in use is refused with its errno.
in_use() {
	refuses "Address already in use" -c "$state/bad.json" --http "127.0.0.1:$SLATE_HTTP_PORT"
}
slate_check metrics port-in-use in_use

scrape() { # FILE
	curl -sf -D "$1.headers" "$url/metrics" -o "$1"
}
# value FILE SERIES -> the sample's value (exact series text, labels in our order)
value() {
	awk -v s="$2" 'index($0, s " ") == 1 {print $NF; found = 1} END {if (!found) print "missing"}' "$1"
}
# expect_delta BEFORE AFTER SERIES WANT
expect_delta() {
	local a b
	a=$(value "$1" "$3")
	b=$(value "$2" "$3")
	if [ "$a" = missing ] || [ "$b" = missing ]; then
		echo "$3: missing (before $a, after $b)"
		return 1
	fi
	if [ "$((b - a))" != "$4" ]; then
		echo "$3: moved by $((b - a)), want $4"
		return 1
	fi
	echo "$3: +$4 ok"
}

# sessions_drop_to_0 SERIES -> 0 once the host's session gauge reads 0 (the
# session or controller ends a moment after the client has gone).
sessions_drop_to_0() {
	local i v
	for i in $(seq 1 50); do
		scrape "$state/sess.txt" || return 1
		v=$(value "$state/sess.txt" "$1")
		[ "$v" = 0 ] && echo "$1 0" && return 0
		sleep 0.1
	done
	echo "$1 still $v"
	return 1
}

promtool_ok() {
	scrape "$state/m0.txt" || return 1
	grep -i '^content-type: text/plain; version=0.0.4' "$state/m0.txt.headers" &&
		promtool check metrics <"$state/m0.txt"
}
slate_check metrics promtool promtool_ok

# N writes of M bytes over iSCSI and one past the end: exactly that in the
# namespace's and the initiator's series.
N=37
M=8192
iscsi_exact() {
	local ns="namespace=\"$SLATE_NS\"" h="transport=\"iscsi\",host=\"$INI\""
	scrape "$state/before.txt" || return 1
	"$io" -u "$(slate_url "$iport" 0)" -i "$INI" -n "$N" -b "$M" -e || return 1
	scrape "$state/after.txt" || return 1
	promtool check metrics <"$state/after.txt" || return 1
	# host series did not exist before: an empty "before" counts as 0
	grep -F "{$h," "$state/before.txt" && return 1
	for s in "slate_host_ops_total{$h,op=\"write\"}" "slate_host_bytes_total{$h,op=\"write\"}" \
		"slate_host_errors_total{$h,status=\"lba-out-of-range\"}" \
		"slate_host_latency_seconds_count{$h,op=\"write\"}"; do
		echo "$s 0" >>"$state/before.txt"
	done
	expect_delta "$state/before.txt" "$state/after.txt" "slate_namespace_ops_total{$ns,op=\"write\"}" $((N + 1)) &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_namespace_bytes_total{$ns,op=\"write\"}" $((N * M)) &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_namespace_errors_total{$ns,status=\"lba-out-of-range\"}" 1 &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_namespace_latency_seconds_count{$ns,op=\"write\"}" "$N" &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_namespace_ops_total{$ns,op=\"read\"}" 0 &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_host_ops_total{$h,op=\"write\"}" $((N + 1)) &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_host_bytes_total{$h,op=\"write\"}" $((N * M)) &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_host_errors_total{$h,status=\"lba-out-of-range\"}" 1 &&
		expect_delta "$state/before.txt" "$state/after.txt" "slate_host_latency_seconds_count{$h,op=\"write\"}" "$N" &&
		[ "$(value "$state/after.txt" "slate_namespace_outstanding{$ns}")" = 0 ] &&
		sessions_drop_to_0 "slate_host_sessions{$h}" &&
		[ "$(value "$state/after.txt" "slate_host_latency_seconds_bucket{$h,op=\"write\",le=\"+Inf\"}")" = "$N" ]
}
slate_check metrics iscsi-exact-counts iscsi_exact

# NVMe/TCP: slate-perf writes 4 KiB blocks as one host NQN; that host's
# series counts every one of them (each moved exactly 4096 bytes), the
# namespace's moved by the same amount, and nothing failed.
nvme_host() {
	local ns="namespace=\"$SLATE_NS\"" h="transport=\"nvme\",host=\"$HOSTNQN\"" ops bytes ios a b
	scrape "$state/nb.txt" || return 1
	"$perf" -t nvme-tcp -a 127.0.0.1 -p "$nport" -n "$NQN" --hostnqn "$HOSTNQN" -q 4 -b 4k -M 0 \
		-r rand -d 2 --json >"$state/perf.json" || return 1
	scrape "$state/na.txt" || return 1
	ios=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ios"])' "$state/perf.json")
	ops=$(value "$state/na.txt" "slate_host_ops_total{$h,op=\"write\"}")
	bytes=$(value "$state/na.txt" "slate_host_bytes_total{$h,op=\"write\"}")
	a=$(value "$state/nb.txt" "slate_namespace_ops_total{$ns,op=\"write\"}")
	b=$(value "$state/na.txt" "slate_namespace_ops_total{$ns,op=\"write\"}")
	echo "slate-perf completed $ios in its window; host ops $ops bytes $bytes; namespace +$((b - a))"
	[ "$ops" != missing ] && [ "$ios" -gt 0 ] && [ "$ops" -ge "$ios" ] &&
		[ "$bytes" = $((ops * 4096)) ] && [ $((b - a)) = "$ops" ] &&
		[ "$(value "$state/na.txt" "slate_host_errors_total{$h,status=\"lba-out-of-range\"}")" = 0 ] &&
		sessions_drop_to_0 "slate_host_sessions{$h}" &&
		promtool check metrics <"$state/na.txt"
}
slate_check metrics nvme-host-counts nvme_host

# The namespace gauges: writing 4 MiB to the thin file namespace allocates
# that much of its file; write protection shows, and a refused write is
# counted as an error of its own status.
ns_gauges() {
	local ns='namespace="thin0"' alloc
	"$io" -u "$(slate_url "$iport" 1)" -i "$INI" -n 64 -b 65536 || return 1
	scrape "$state/g0.txt" || return 1
	alloc=$(value "$state/g0.txt" "slate_namespace_allocated_bytes{$ns}")
	echo "thin0 allocated $alloc"
	[ "$alloc" != missing ] && [ "$alloc" -ge $((4 << 20)) ] && [ "$alloc" -le $((5 << 20)) ] &&
		[ "$(value "$state/g0.txt" "slate_namespace_capacity_bytes{$ns}")" = $((64 << 20)) ] &&
		[ "$(value "$state/g0.txt" "slate_namespace_write_protected{$ns}")" = 0 ] &&
		[ "$(value "$state/g0.txt" "slate_namespace_sanitize_state{$ns,state=\"never\"}")" = 1 ] || return 1
	"$ctl" -s "$state/run/slated.sock" namespace_set name=thin0 write_protect=true || return 1
	"$io" -u "$(slate_url "$iport" 1)" -i "$INI" -n 2 -b 4096 -w || return 1
	scrape "$state/g1.txt" || return 1
	"$ctl" -s "$state/run/slated.sock" namespace_set name=thin0 write_protect=false || return 1
	[ "$(value "$state/g1.txt" "slate_namespace_write_protected{$ns}")" = 1 ] &&
		expect_delta "$state/g0.txt" "$state/g1.txt" "slate_namespace_errors_total{$ns,status=\"write-protected\"}" 2 &&
		expect_delta "$state/g0.txt" "$state/g1.txt" "slate_namespace_bytes_total{$ns,op=\"write\"}" 0
}
slate_check metrics namespace-gauges ns_gauges

read_only() {
	local c
	for m in POST PUT DELETE PATCH; do
		c=$(curl -s -o /dev/null -w '%{http_code}' -X "$m" --data x "$url/metrics")
		echo "$m /metrics -> $c"
		[ "$c" = 405 ] || return 1
	done
	c=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/namespace_delete")
	echo "GET /api/namespace_delete -> $c"
	[ "$c" = 404 ] || return 1
	curl -s -D - -o /dev/null -X POST "$url/" | grep -i '^allow: GET, HEAD' || return 1
	curl -sf "$url/api/status" -o "$state/status.json" &&
		python3 - "$state/status.json" "$SLATE_NS" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ns = {n["name"]: n for n in d["namespaces"]}
assert sys.argv[2] in ns and "thin0" in ns, ns.keys()
assert ns[sys.argv[2]]["stats"]["ops"]["write"] > 0
assert "allocated_bytes" in ns["thin0"] and ns["thin0"]["thin"]
assert d["iscsi"]["portals"] and d["nvmf"]["listeners"] and d["hosts"]
print("status JSON ok:", len(d["namespaces"]), "namespaces,", len(d["hosts"]), "hosts")
PY
}
slate_check metrics read-only read_only

# --- the status page in a real browser, under load ----------------------------
"$perf" -t nvme-tcp -a 127.0.0.1 -p "$nport" -n "$NQN" --hostnqn "$HOSTNQN" -q 8 -b 4k -M 70 \
	-r rand -d 40 >"$logdir/load.log" 2>&1 &
load_pid=$!
sleep 2
chrome() { # extra chromium args...
	# Every host name but slated's address resolves nowhere, so a request
	# elsewhere could not succeed; the net log below shows it was not tried.
	timeout -k 5 90 chromium --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" \
		--user-data-dir="$state/chrome" --virtual-time-budget=9000 "$@" "$url/"
}
status_page() {
	chrome --dump-dom --log-net-log="$state/netlog.json" >"$state/dom.html" 2>"$logdir/chromium.err" || return 1
	python3 - "$state/dom.html" "$state/netlog.json" "$SLATE_HTTP_PORT" <<'PY' || return 1
import json, re, sys
dom = open(sys.argv[1]).read()
m = re.search(r'id="points" data-points="(\d+)" data-nonzero="(\d+)"', dom)
s = re.search(r'id="samples">(\d+)<', dom)
assert m and s, "no plot counters in the DOM"
points, nonzero, samples = int(m.group(1)), int(m.group(2)), int(s.group(1))
print("samples", samples, "points plotted", points, "above zero", nonzero)
assert samples >= 2 and points > 0 and nonzero > 0
for want in ("namespace ns0", "namespace thin0", "nqn.2026-12.io.slate:metrics", "5eed0000"):
    assert want in dom, "page lacks " + want
# Every request the page made (net log events whose initiator is the
# page's origin) went to slated.  Chromium's own background requests (no
# initiator: update checks and the like) are the browser's, not the page's,
# and the resolver rules above fail them anyway.
own = "http://127.0.0.1:%s" % sys.argv[3]
page = set()
for e in json.load(open(sys.argv[2]))["events"]:
    p = e.get("params") or {}
    if "url" in p and p.get("initiator") == own:
        page.add(p["url"])
print("the page requested:", sorted(page))
others = [u for u in page if not u.startswith(own + "/")]
assert own + "/api/status" in page and not others, "requests outside slated: %r" % others
PY
	# And the page names no other origin at all, and forbids any.
	curl -sf -D "$state/page.headers" "$url/" -o "$state/page.html" || return 1
	if grep -Eo '(https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}' "$state/page.html"; then
		echo "the page names another origin"
		return 1
	fi
	grep -i "^content-security-policy: default-src 'none';.*connect-src 'self'" "$state/page.headers"
}
slate_check metrics status-page status_page

screenshot() {
	chrome --window-size=1400,1900 --screenshot="$logdir/status-page.png" 2>"$logdir/chromium-shot.err" &&
		[ -s "$logdir/status-page.png" ] && echo "saved $logdir/status-page.png"
}
slate_check metrics status-page-screenshot screenshot
kill "$load_pid" 2>/dev/null
wait "$load_pid" 2>/dev/null
load_pid=

clean_exit() {
	slate_stop
	local rc=$?
	echo "slated exit status $rc"
	[ "$rc" = 0 ] && slate_sanitizer_clean "$daemon_log"
}
slate_check metrics clean-exit clean_exit

[ "$slate_nfail" = 0 ]
