#!/bin/bash
# tests/service/run.sh — slated as a service, without a service manager:
# what `meson install` puts where (prefix-aware paths in the unit and the
# default config), the unit checked by systemd-analyze, the man pages
# rendered without a groff warning, the shipped default config served by a
# real slated, the sd_notify protocol (READY=1 once listening, RELOADING=1 /
# READY=1 around SIGHUP, STOPPING=1) received on a NOTIFY_SOCKET of our own,
# and the journal's priority prefixes when $JOURNAL_STREAM names stderr.
# The package itself and systemd as PID 1 are tests/package/run.sh.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

B=$SLATE_BUILD
L=$SLATE_LOGDIR/service
mkdir -p "$L"
rc=0
pass() { slate_result PASS "service.$1"; }
fail() {
	slate_result FAIL "service.$1" "${3:-}" "$2"
	rc=1
}

# --- man pages: groff (man(7) macros, all warnings) and man-db's own check --
for page in man/slated.8 man/slatectl.8 man/slate-perf.1; do
	name=man.$(basename "$page")
	out=$L/$name.log
	{
		groff -man -ww -z "$page"
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >/dev/null
	} >"$out" 2>&1
	if [ -s "$out" ]; then
		fail "$name" "warnings while rendering" "$out"
	elif ! LC_ALL=C.UTF-8 man -l "$page" 2>/dev/null | grep -q '^NAME'; then
		fail "$name" "no NAME section in the rendered page"
	else
		pass "$name"
	fi
done

# --- meson install into a staging folder -------------------------------------
stage=$L/stage
rm -rf "$stage"
prefix=$(meson introspect "$B" --buildoptions |
	python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
sysconf=$(meson introspect "$B" --buildoptions |
	python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="sysconfdir"][0])')
case $sysconf in /*) ;; *) sysconf=$prefix/$sysconf ;; esac
if meson install -C "$B" --no-rebuild --destdir "$stage" >"$L/install.log" 2>&1; then
	missing=""
	for f in sbin/slated sbin/slatectl bin/slate-perf share/man/man8/slated.8 \
		share/man/man8/slatectl.8 share/man/man1/slate-perf.1 share/doc/slate/README.md \
		share/doc/slate/config.md; do
		[ -e "$stage$prefix/$f" ] || missing="$missing $prefix/$f"
	done
	unit=$(find "$stage" -name slate.service | head -n 1)
	[ -n "$unit" ] || missing="$missing slate.service"
	[ -e "$stage$sysconf/slate/slate.json" ] || missing="$missing $sysconf/slate/slate.json"
	if [ -n "$missing" ]; then
		fail install "not installed:$missing" "$L/install.log"
	elif ! grep -q "^ExecStart=$prefix/sbin/slated --config $sysconf/slate/slate.json " "$unit"; then
		fail install "the unit's ExecStart does not name $prefix/sbin/slated and $sysconf/slate/slate.json" "$unit"
	else
		pass install
	fi
else
	fail install "meson install failed" "$L/install.log"
	unit=""
fi

# --- the unit: systemd-analyze verify (unknown keys, bad values, missing binary)
if [ -n "$unit" ] && command -v systemd-analyze >/dev/null; then
	# ExecStart names the installed binary: point it at the staged one.
	vunit=$L/verify/slate.service
	mkdir -p "$L/verify"
	sed "s|$prefix/sbin/slated|$stage$prefix/sbin/slated|" "$unit" >"$vunit"
	if SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$vunit" >"$L/verify.log" 2>&1 &&
		! grep -q 'slate.service' "$L/verify.log"; then
		pass unit.verify
	else
		fail unit.verify "systemd-analyze verify complained" "$L/verify.log"
	fi
	# The hardening, measured by systemd itself: 'OK' or better (exposure < 5).
	if systemd-analyze security --offline=yes --no-pager "$vunit" >"$L/security.log" 2>&1; then
		score=$(sed -n 's/.*Overall exposure level for slate.service: \([0-9.]*\).*/\1/p' "$L/security.log")
		if [ -n "$score" ] && python3 -c "import sys; sys.exit(0 if float('$score') < 5.0 else 1)"; then
			slate_result PASS service.unit.security "" "exposure $score"
		else
			fail unit.security "exposure ${score:-unknown}, want < 5.0" "$L/security.log"
		fi
	else
		fail unit.security "systemd-analyze security failed" "$L/security.log"
	fi
else
	slate_result SKIP service.unit.verify "systemd-analyze or the installed unit missing"
fi

# --- the shipped default config served by slated -------------------------------
# Its ports become 0 (the kernel picks free ones: other tests run beside us);
# state dir and socket come from the command line, as in the unit.
cfg=$stage$sysconf/slate/slate.json
st=$L/default-state
rm -rf "$st"
mkdir -p "$st"
if [ -f "$cfg" ] && sed -e 's/"port": 3260/"port": 0/' -e 's/"port": 4420/"port": 0/' "$cfg" >"$L/default.json" &&
	! grep -q '"port": [1-9]' "$L/default.json"; then
	if slate_start "$st" "$L/default.json" 0 "$L/default-slated.log" -r "$st/slated.sock" \
		>"$L/default-start.log" 2>&1; then
		"$B/slatectl" -s "$st/slated.sock" --json namespace_list >"$L/default-ns.json" 2>&1
		"$B/slatectl" -s "$st/slated.sock" --json iscsi_portal_list >"$L/default-portals.json" 2>&1
		"$B/slatectl" -s "$st/slated.sock" --json nvmf_listener_list >"$L/default-listeners.json" 2>&1
		"$B/slatectl" -s "$st/slated.sock" --json iscsi_target_list >"$L/default-targets.json" 2>&1
		"$B/slatectl" -s "$st/slated.sock" --json rpc_list >"$L/rpc-list.json" 2>&1
		# slatectl(8) lists the methods by hand: every method slated has must be there.
		undocumented=$(python3 -c 'import json,sys; print("\n".join(m["name"] if isinstance(m, dict) else m for m in json.load(open(sys.argv[1]))))' \
			"$L/rpc-list.json" 2>"$L/man-methods.log" | while read -r m; do
			grep -q "^\.B $m\( \|\$\)" man/slatectl.8 || echo "$m"
		done)
		if [ ! -s "$L/rpc-list.json" ] || [ -s "$L/man-methods.log" ]; then
			fail man.methods "rpc_list unreadable" "$L/man-methods.log"
		elif [ -n "$undocumented" ]; then
			fail man.methods "methods missing from man/slatectl.8 METHODS: $(echo $undocumented)"
		else
			pass man.methods
		fi
		if python3 - "$L" >"$L/default-check.log" 2>&1 <<'PY'; then
import json, sys
d = sys.argv[1]
ns = json.load(open(d + "/default-ns.json"))
portals = json.load(open(d + "/default-portals.json"))
listeners = json.load(open(d + "/default-listeners.json"))
targets = json.load(open(d + "/default-targets.json"))
print(ns, portals, listeners, targets)
n = [x for x in ns if x["name"] == "disk0"]
assert len(ns) == 1 and n, "one namespace disk0"
n = n[0]
size = n.get("size_bytes", n.get("size"))
blocks = n.get("num_blocks", n.get("blocks"))
assert size == 1 << 30 or (blocks and blocks * n.get("block_size", 512) == 1 << 30), "1 GiB"
assert n.get("thin") is True, "thin"
assert [p["addr"] for p in portals] == ["127.0.0.1"], "iSCSI on 127.0.0.1 only"
assert [l["addr"] for l in listeners] == ["127.0.0.1"], "NVMe/TCP on 127.0.0.1 only"
assert [t["name"] for t in targets] == ["iqn.2026-12.io.slate:disk0"], "target"
PY
			pass default_config
		else
			fail default_config "the running config is not the default export" "$L/default-check.log"
		fi
		slate_stop >>"$L/default-start.log" 2>&1
	else
		fail default_config "slated did not start with the shipped config" "$L/default-start.log"
	fi
else
	fail default_config "no shipped config to test (or its ports were not rewritten)"
fi

# --- sd_notify: our own NOTIFY_SOCKET, as systemd would set it -----------------
if grep -q SLATE_HAVE_SYSTEMD "$B/build.ninja" 2>/dev/null; then
	if python3 tests/service/notify.py "$B/slated" "$L/notify" >"$L/notify.log" 2>&1; then
		pass notify
	else
		fail notify "notifications missing or out of order" "$L/notify.log"
	fi
else
	slate_result SKIP service.notify "built without libsystemd"
fi

# --- journal priorities: $JOURNAL_STREAM naming stderr ------------------------
python3 tests/service/journal.py "$B/slated" "$L/journal" >"$L/journal.log" 2>&1 && pass journal ||
	fail journal "priority prefixes wrong" "$L/journal.log"

exit $rc
