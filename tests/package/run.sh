#!/bin/bash
# tests/package/run.sh — the Debian package, built and installed (issue 12
# evidence 3).
#
# On the host: `make deb` builds build-deb/slate_*.deb from this tree with
# dpkg-buildpackage (the unit tests run inside it), lintian checks it, and
# its file list and conffiles are checked.  Then linuxvm boots and this same
# script runs inside with --inside: the VM's root is the host's, under a
# throw-away overlay, so `dpkg -i` changes nothing on the host.  linuxvm runs
# no init system, so systemd is started as PID 1 of a new PID and mount
# namespace (as a container manager would: container=linuxvm), booting an
# empty target so that no other host service starts.  There:
#   dpkg -i; systemctl start slate (Type=notify: returns once serving);
#   the default export served (NVMe/TCP: the kernel host writes and reads
#   back; iSCSI: iscsi-ls lists the target); slatectl without -s finds the
#   service's socket; journal priorities (info, and a provoked warning);
#   systemctl reload with a changed config while the kernel host stays
#   connected; systemctl stop (clean, exit 0); man slated.
# The reload is live reconfiguration (src/mgmt/reload.c): with systemd 252
# `systemctl reload` returns once the signal is sent, so the check waits
# for the added namespace.
#
# Environment: PACKAGE_DEB=path uses an already built .deb (no make deb).
# --deb: only `make deb` and its result line (tests/run-all.sh builds the
# package so in the background, then runs this with PACKAGE_DEB).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh

make_deb() {
	if make deb >"$L/make-deb.log" 2>&1; then
		slate_result PASS package.deb.build
	else
		slate_result FAIL package.deb.build "$L/make-deb.log" "make deb failed"
		return 1
	fi
}

if [ "${1:-}" = --deb ]; then
	L=$SLATE_LOGDIR/package
	mkdir -p "$L"
	make_deb
	exit
fi
if [ "${1:-}" != --inside ]; then
	L=$SLATE_LOGDIR/package
	mkdir -p "$L"
	rc=0
	deb=${PACKAGE_DEB:-}
	if [ -z "$deb" ]; then
		make_deb || exit 1
		deb=$(ls build-deb/slate_*_amd64.deb 2>/dev/null | head -n 1)
	fi
	[ -f "$deb" ] || {
		slate_result FAIL package.deb.build "" "no .deb at '$deb'"
		exit 1
	}
	deb=$(realpath "$deb")
	changes=$(ls "$(dirname "$deb")"/slate_*.changes 2>/dev/null | head -n 1)
	if lintian --fail-on error,warning ${changes:-$deb} >"$L/lintian.log" 2>&1; then
		slate_result PASS package.lintian "" "no error or warning tag"
	else
		slate_result FAIL package.lintian "$L/lintian.log" "lintian errors or warnings"
		rc=1
	fi
	dpkg-deb -c "$deb" >"$L/contents.log" 2>&1
	dpkg-deb -f "$deb" Depends >>"$L/contents.log" 2>&1
	missing=""
	for f in ./usr/sbin/slated ./usr/sbin/slatectl ./usr/bin/slate-perf ./lib/systemd/system/slate.service \
		./etc/slate/slate.json ./usr/share/man/man8/slated.8.gz ./usr/share/man/man8/slatectl.8.gz \
		./usr/share/man/man1/slate-perf.1.gz ./usr/share/doc/slate/copyright; do
		grep -q " $f\$" "$L/contents.log" || missing="$missing $f"
	done
	conff=$(dpkg-deb --info "$deb" conffiles 2>/dev/null)
	if [ -n "$missing" ]; then
		slate_result FAIL package.contents "$L/contents.log" "missing:$missing"
		rc=1
	elif [ "$conff" != /etc/slate/slate.json ]; then
		slate_result FAIL package.contents "$L/contents.log" "conffiles are '$conff', want /etc/slate/slate.json"
		rc=1
	else
		slate_result PASS package.contents
	fi
	slate_vm_run package-vm 1200 env "PACKAGE_DEB=$deb" tests/package/run.sh --inside || rc=1
	exit $rc
fi

# ---------------------------------------------------------------- inside the VM
L=$SLATE_LOGDIR
mkdir -p "$L"
deb=$PACKAGE_DEB
NQN=nqn.2026-12.io.slate:disk0
IQN=iqn.2026-12.io.slate:disk0
fails=0
pass() { slate_result PASS "package.$1" "" "${2:-}"; }
fail() {
	slate_result FAIL "package.$1" "${3:-}" "$2"
	fails=$((fails + 1))
}

# --- install ---------------------------------------------------------------
# man-db's trigger re-indexes every manual page; under emulation that takes
# minutes, and `man slated` finds the page without the index.
rm -f /var/lib/man-db/auto-update
if dpkg -i "$deb" >"$L/dpkg.log" 2>&1 && dpkg-query -W -f='${Status}' slate | grep -q 'ok installed'; then
	pass install
else
	fail install "dpkg -i failed" "$L/dpkg.log"
	exit 1
fi

# --- systemd as PID 1 of its own PID namespace -----------------------------
mkdir -p /etc/systemd/system
cat >/etc/systemd/system/linuxvm-test.target <<'EOF'
[Unit]
Description=linuxvm test boot (nothing but what a test starts)
AllowIsolate=yes
EOF
# The VM's root is this machine's, not a fresh Debian: its iSCSI initiator
# services (pulled in by sysinit.target here) would log in to whatever they
# find, and systemd-binfmt's automount of binfmt_misc hangs in a PID
# namespace; systemd-tmpfiles-setup empties the overlay's /tmp, which is the
# host's /tmp read over 9p, for many minutes under emulation.  None of
# them has anything to do with slate (StateDirectory= and RuntimeDirectory=
# are systemd's own, not tmpfiles').
for u in open-iscsi.service iscsid.service iscsid.socket systemd-binfmt.service \
	proc-sys-fs-binfmt_misc.automount systemd-tmpfiles-setup.service \
	systemd-tmpfiles-clean.timer; do
	ln -sf /dev/null "/etc/systemd/system/$u"
done
# journald keeps the journal in memory (/run): the VM is thrown away anyway.
mkdir -p /etc/systemd/journald.conf.d
printf '[Journal]\nStorage=volatile\n' >/etc/systemd/journald.conf.d/linuxvm.conf
unshare --pid --fork --mount --mount-proc --kill-child \
	env -i container=linuxvm PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	/lib/systemd/systemd --system --unit=linuxvm-test.target --log-target=console \
	>"$L/systemd.log" 2>&1 &
ushare=$!
sdpid=
for _ in $(seq 1 300); do
	sdpid=$(pgrep -P "$ushare" -x systemd | head -n 1)
	[ -n "$sdpid" ] && break
	sleep 0.1
done
sd() { nsenter -t "$sdpid" -m -p "$@"; }
# Until its bus socket exists systemctl cannot ask; then --wait for the boot.
state=
if [ -n "$sdpid" ]; then
	for _ in $(seq 1 600); do
		[ -S /proc/"$sdpid"/root/run/systemd/private ] && break
		kill -0 "$sdpid" 2>/dev/null || break
		sleep 0.5
	done
	state=$(sd timeout 300 systemctl is-system-running --wait 2>&1)
fi
case $state in
running | degraded) pass systemd.boot "$state" ;;
*)
	fail systemd.boot "systemd did not boot (state '$state')" "$L/systemd.log"
	exit 1
	;;
esac
# While waiting: systemd's pending jobs, for a test that hangs.
(while sleep 20; do
	date
	sd systemctl list-jobs --no-pager
done) >"$L/jobs.log" 2>&1 &
# What every service's start needs (sysinit.target, basic.target: journald,
# tmpfiles...), brought up first so that slate's own start is timed alone;
# under emulation it takes minutes.
if sd timeout 900 systemctl start basic.target >"$L/basic.log" 2>&1; then
	pass systemd.basic
else
	sd systemctl list-jobs --no-pager >>"$L/basic.log" 2>&1
	fail systemd.basic "basic.target did not start" "$L/basic.log"
fi
sd systemctl --failed --no-pager >"$L/failed-units.log" 2>&1

# --- systemctl start: Type=notify returns once slated is serving -----------
en=$(sd systemctl is-enabled slate 2>&1)
if sd timeout 600 systemctl start slate >"$L/start.log" 2>&1 &&
	[ "$(sd systemctl is-active slate)" = active ]; then
	status=$(sd systemctl show slate -p StatusText --value)
	if [ "$en" != enabled ]; then
		fail start "started, but the package did not enable the unit ($en)"
	elif ! echo "$status" | grep -q '^serving'; then
		fail start "active, but StatusText is '$status'"
	else
		pass start "enabled, StatusText: $status"
	fi
else
	sd systemctl status slate --no-pager >>"$L/start.log" 2>&1
	sd systemctl list-jobs --no-pager >>"$L/start.log" 2>&1
	sd journalctl -b --no-pager -n 60 >>"$L/start.log" 2>&1
	fail start "systemctl start slate failed" "$L/start.log"
	exit 1
fi
mainpid=$(sd systemctl show slate -p MainPID --value)

# --- the default export, served -------------------------------------------
if [ -S /run/slate/slated.sock ] && [ -f /var/lib/slate/disk0.img ] &&
	(cd / && slatectl --json status) >"$L/slatectl.log" 2>&1 && grep -q '"version"' "$L/slatectl.log"; then
	pass paths "/run/slate/slated.sock, /var/lib/slate/disk0.img, slatectl finds the socket"
else
	ls -la /run/slate /var/lib/slate >>"$L/slatectl.log" 2>&1
	fail paths "socket, state or slatectl's default socket wrong" "$L/slatectl.log"
fi
if iscsi-ls -s iscsi://127.0.0.1 >"$L/iscsi-ls.log" 2>&1 && grep -q "$IQN" "$L/iscsi-ls.log"; then
	pass serves.iscsi "iscsi-ls lists $IQN"
else
	fail serves.iscsi "iscsi-ls does not list $IQN" "$L/iscsi-ls.log"
fi
dev=
{
	nvme connect -t tcp -a 127.0.0.1 -s 4420 -n "$NQN" || true
	for _ in $(seq 1 100); do
		for c in /sys/class/nvme/nvme*; do
			[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] && dev=/dev/${c##*/}n1
		done
		[ -n "$dev" ] && [ -b "$dev" ] && break
		dev=
		sleep 0.1
	done
	echo "device: $dev"
} >"$L/connect.log" 2>&1
pattern=$L/pattern.bin
head -c $((1 << 20)) /dev/urandom >"$pattern"
io_check() { # io_check OFFSET_MIB: write the pattern there and read it back
	dd if="$pattern" of="$dev" bs=1M seek="$1" oflag=direct conv=fsync status=none &&
		cmp <(dd if="$dev" bs=1M skip="$1" count=1 iflag=direct status=none) "$pattern"
}
if [ -n "$dev" ] && io_check 1 >>"$L/connect.log" 2>&1; then
	pass serves.nvme "kernel host on $dev wrote and read back 1 MiB"
else
	fail serves.nvme "nvme connect or I/O failed" "$L/connect.log"
fi

# --- the journal: priorities per level -------------------------------------
printf '\x7f\x00\x08\x00\x08\x00\x00\x00' >/dev/tcp/127.0.0.1/4420 2>/dev/null
for _ in $(seq 1 100); do
	sd journalctl -u slate -p warning --no-pager -o cat 2>/dev/null | grep -q 'protocol violation' && break
	sleep 0.2
done
sd journalctl -u slate --no-pager -o json >"$L/journal.json" 2>&1
if python3 - "$L/journal.json" >"$L/journal-check.log" 2>&1 <<'PY'; then
import json, sys
prio = {}
for l in open(sys.argv[1]):
    try:
        e = json.loads(l)
    except ValueError:
        continue
    m = e.get("MESSAGE")
    if isinstance(m, str):
        prio.setdefault(m, e.get("PRIORITY"))
print(prio)
info = [m for m, p in prio.items() if "JSON-RPC listening" in m]
warn = [m for m, p in prio.items() if "protocol violation" in m]
assert info and prio[info[0]] == "6", "info line at priority 6"
assert warn and prio[warn[0]] == "4", "warning at priority 4"
assert not [m for m in prio if m.startswith("<")], "a raw <N> prefix reached the journal"
PY
	pass journal "info at priority 6, warning at 4"
else
	fail journal "priorities wrong in the journal" "$L/journal-check.log"
fi

# --- systemctl reload with a changed config, a host connected ---------------
cp /etc/slate/slate.json "$L/slate.json.orig"
python3 - <<'PY'
import json
p = "/etc/slate/slate.json"
c = json.load(open(p))
c["config"].insert(1, {"method": "namespace_create",
                       "params": {"name": "disk1", "backend": "mem", "size": "64M"}})
c["config"].append({"method": "nvmf_ns_attach",
                    "params": {"nqn": "nqn.2026-12.io.slate:disk0", "nsid": 2, "namespace": "disk1"}})
json.dump(c, open(p, "w"), indent=2)
PY
since=$(sd date '+%Y-%m-%d %H:%M:%S')
if sd timeout 300 systemctl reload slate >"$L/reload.log" 2>&1 && [ "$(sd systemctl is-active slate)" = active ] &&
	[ "$(sd systemctl show slate -p MainPID --value)" = "$mainpid" ]; then
	sleep 1
	sd journalctl -u slate --since "$since" --no-pager -o cat >>"$L/reload.log" 2>&1
	if grep -Eqi 'sighup|reload' "$L/reload.log"; then
		pass reload.signal "SIGHUP reached slated (pid $mainpid still serving)"
	else
		fail reload.signal "no SIGHUP line in the journal" "$L/reload.log"
	fi
else
	fail reload.signal "systemctl reload failed or slated was restarted" "$L/reload.log"
fi
if [ -n "$dev" ] && io_check 2 >>"$L/reload.log" 2>&1 && nvme list-subsys 2>/dev/null | grep -q live; then
	pass reload.host_stays "the connected host kept its controller and I/O"
else
	nvme list-subsys >>"$L/reload.log" 2>&1
	fail reload.host_stays "the host lost its connection or I/O across the reload" "$L/reload.log"
fi
for _ in $(seq 60); do
	slatectl --json namespace_list >"$L/reload-ns.log" 2>&1
	grep -q '"disk1"' "$L/reload-ns.log" && break
	sleep 1
done
if grep -q '"disk1"' "$L/reload-ns.log"; then
	pass reload.apply "namespace disk1 added by the reload"
else
	fail reload.apply "the changed config was not applied" "$L/reload-ns.log"
fi
nvme disconnect -n "$NQN" >/dev/null 2>&1

# --- systemctl stop: clean -----------------------------------------------
if sd timeout 300 systemctl stop slate >"$L/stop.log" 2>&1; then
	res=$(sd systemctl show slate -p Result --value)
	code=$(sd systemctl show slate -p ExecMainStatus --value)
	sd journalctl -u slate --no-pager -o cat -n 20 >>"$L/stop.log" 2>&1
	# MainPID is a PID of systemd's namespace: look for slated by name (it
	# runs nowhere else in this VM).
	if [ "$res" = success ] && [ "$code" = 0 ] && ! pgrep -x slated >/dev/null &&
		grep -q 'shutting down' "$L/stop.log"; then
		pass stop "Result=success, exit status 0"
	else
		fail stop "Result=$res ExecMainStatus=$code" "$L/stop.log"
	fi
else
	fail stop "systemctl stop slate failed" "$L/stop.log"
fi

# --- man slated ------------------------------------------------------------
if LC_ALL=C.UTF-8 MANPAGER=cat man slated >"$L/man.log" 2>&1 && grep -q 'slated - the Slate storage target daemon' "$L/man.log"; then
	pass man
else
	fail man "man slated did not show the page" "$L/man.log"
fi

sd systemctl poweroff >/dev/null 2>&1 || true
[ "$fails" = 0 ]
