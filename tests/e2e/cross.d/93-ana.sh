# tests/e2e/cross.d/93-ana.sh — sourced by tests/e2e/cross-linux.sh.
# Linux native NVMe multipath over two gateways (README "Several gateways
# (ANA / ALUA)"): a second slated, gateway_id 2, exports the same file and
# identity (a copy of the namespace's metadata; the data-consistency claim
# across gateways is the rbd group's, not this part's: two processes on one
# file share nothing but the file) as NSID 1 of the same subsystem, with
# group 1 non-optimized.  The kernel connects to it too and shows one
# namespace with two paths, each with its gateway's ANA state and its own
# CNTLID; `nvme ana-log` reads the state; a change on the second gateway
# reaches the kernel through the ANA change notice (its path becomes
# inaccessible) while I/O on the namespace keeps working through the first.
#
# Then automatic takeover (issue 14 evidence 2, README "Failover"): the
# roles swap (gateway 2 optimized, this one non-optimized and watching
# gateway 2's NVMe/TCP port with ana_peers_set), and twice — once for the
# NVMe multipath device, once for a dm-multipath device over the two
# iSCSI sessions (hand-made table: the VM has no multipathd) — fio writes
# with crc32c verification while gateway 2 is killed with SIGKILL: I/O goes
# on through this gateway, which promotes its path to optimized by itself
# (the kernel's ana_state, `nvme ana-log`, `sg_rtpg`), and when gateway 2
# is started again and answers, gives it back (failback); fio finishes
# with no verification error.  The two gateways share the file through the
# kernel: the file backend writes with O_DIRECT (or through the page
# cache, one per kernel) before it completes, and keeps no cache of its own.
# It costs about three minutes of VM time (165-190 s measured: a second slated
# under ASan, a second controller, two fio runs of 32 MiB written and
# verified at a few hundred IOPS under TCG, two restarts), so
# make test's patterns ('[1-6]*,90-pi-*,9[1-9]-*') do not run it: only a pattern that
# names it does, e.g.
#   CROSS_NAME=ana CROSS_PARTS='93-*' tests/e2e/cross-linux.sh
case $parts in *93* | *ana*) ;; *) return 0 ;; esac

ana_b=/tmp/slate-e2e-cross-b
ana_port=4421
ana_ctl() { "$SLATE_BUILD/slatectl" -s "$ana_b/run/slated.sock" "$@"; }
ana_ctrls() { # the kernel's controllers of $XNQN: "nvmeN:CNTLID" per line
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$XNQN" ] || continue
		echo "${c##*/}:$(cat "$c/cntlid")"
	done
}
ana_path_state() { # CNTLID -> the kernel's ANA state of NSID 1 through that controller
	local c n
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$XNQN" ] || continue
		[ "$(cat "$c/cntlid")" = "$1" ] || continue
		for n in "$c"/nvme*c*n1; do
			[ -f "$n/ana_state" ] && { cat "$n/ana_state"; return 0; }
		done
	done
	return 1
}
ana_state_is() { [ "$(ana_path_state "$1")" = "$2" ]; }

ana_iport=3261
ana_ctrl_state() { # nvmeN -> the kernel's ANA state of NSID 1 through that controller
	local n
	for n in /sys/class/nvme/"$1"/nvme*c*n1; do
		[ -f "$n/ana_state" ] && { cat "$n/ana_state"; return 0; }
	done
	return 1
}
ana_ctrl_is() { [ "$(ana_ctrl_state "$1")" = "$2" ]; }
ana_b_config() { # STATE: gateway 2's config with group 1 in STATE
	cat >"$ana_b/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"], "gateway_id": 2}, "config": [
  {"method": "namespace_create", "params": {"name": "shared", "backend": "file", "path": "$state/shared.img", "block_size": 512}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$XNQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$XNQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$XNQN", "nsid": 1, "namespace": "shared"}},
  {"method": "iscsi_target_create", "params": {"name": "$XIQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$XIQN", "lun": 0, "namespace": "shared"}},
  {"method": "ana_group_set", "params": {"group": 1, "state": "$1"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": $ana_iport}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $ana_port}}
]}
JSON
}
ana_b_start() { # (re)start gateway 2 -> ana_pid
	local rc
	gw2_start "$ana_b/run" "$ana_b/slate.json" "$ana_port" "$logdir/slated-b.log"
	rc=$?
	ana_pid=$gw2_pid
	return $rc
}
ana_b_kill() { # SIGKILL gateway 2 while the host writes
	echo "ana: kill -9 of gateway 2 at ${SECONDS}s"
	kill -KILL "$ana_pid" 2>/dev/null
	wait "$ana_pid" 2>/dev/null
	ana_pid=
}
ana_writes() { awk '{print $5}' "/sys/block/$1/stat"; } # DEV -> writes completed
ana_fio() { # DEV LOG -> fio writes 32 MiB at random with crc32c, then verifies every block
	fio --name=failover --filename="$1" --rw=randwrite --bs=4k --size=32M --direct=1 \
		--ioengine=libaio --iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--output="$2"
}
ana_fio_clean() { # LOG -> fio ended without an error or a verification failure
	grep -q 'err= 0' "$1" && ! grep -qiE 'verify: bad|bad magic|crc32c: verify failed' "$1"
}

rm -rf "$ana_b"
mkdir -p "$ana_b/run"
cp "$state/run/shared.meta.json" "$ana_b/run/shared.meta.json"
ana_b_config non-optimized
ana_pid=
echo "ana: starting the second gateway at ${SECONDS}s"
check ana-second-gateway ana_b_start
if [ -z "$ana_pid" ] || ! kill -0 "$ana_pid" 2>/dev/null; then
	: # ana-second-gateway failed: nothing to check
elif [ "$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)" != Y ]; then
	slate_result SKIP e2e-cross.ana-multipath "" "nvme_core.multipath is off in this kernel"
else
	ana_a_cntlid=$(ctl --json nvmf_ctrl_list | python3 -c 'import json,sys
print(next(c["cntlid"] for c in json.load(sys.stdin) if c["subnqn"] == sys.argv[1]))' "$XNQN")
	# a dead path is retried every second (the default is 10 s)
	nvme connect -t tcp -a 127.0.0.1 -s "$ana_port" -n "$XNQN" --reconnect-delay=1 \
		--ctrl-loss-tmo=120 >"$logdir/ana-connect.log" 2>&1
	ana_b_cntlid=$(ana_ctl --json nvmf_ctrl_list | python3 -c 'import json,sys
print(next(c["cntlid"] for c in json.load(sys.stdin) if c["subnqn"] == sys.argv[1]))' "$XNQN")
	echo "ana: second path connected at ${SECONDS}s"
	ana_ctrls >>"$logdir/ana-connect.log"
	echo "cntlid a=$ana_a_cntlid b=$ana_b_cntlid" >>"$logdir/ana-connect.log"
	# one subsystem, one namespace head, two controllers with distinct CNTLIDs
	check ana-two-paths wait_for 10 sh -c "[ \$(grep -lx '$XNQN' /sys/class/nvme/nvme*/subsysnqn | wc -l) = 2 ]"
	check ana-cntlids test -n "$ana_b_cntlid" -a "$((ana_b_cntlid >> 12))" = 2 -a "$ana_a_cntlid" != "$ana_b_cntlid"
	check ana-path-a-optimized wait_for 10 ana_state_is "$ana_a_cntlid" optimized
	check ana-path-b-non-optimized wait_for 10 ana_state_is "$ana_b_cntlid" non-optimized
	ana_b_ctrl=$(ana_ctrls | sed -n "s/^\(nvme[0-9]*\):$ana_b_cntlid\$/\1/p")
	check ana-log nvme ana-log "/dev/$ana_b_ctrl"
	check ana-log-state sh -c "nvme ana-log /dev/$ana_b_ctrl | grep -q 'non-optimized'"
	# a change on gateway 2: the kernel learns it from the notice, I/O goes on through 1
	ana_ctl ana_group_set group=1 state=inaccessible >>"$logdir/ana-connect.log" 2>&1
	check ana-change-seen wait_for 10 ana_state_is "$ana_b_cntlid" inaccessible
	check ana-path-a-still-optimized ana_state_is "$ana_a_cntlid" optimized
	check ana-io-continues dd if="$NVDEV" of=/dev/null bs=4096 count=16 iflag=direct
	echo "ana: checks done at ${SECONDS}s"

	# --- automatic takeover over NVMe: gateway 2 optimized, this one watching it
	ana_a_ctrl=$(ana_ctrls | sed -n "s/^\(nvme[0-9]*\):$ana_a_cntlid\$/\1/p")
	ana_ctl ana_group_set group=1 state=optimized >>"$logdir/ana-connect.log" 2>&1
	ctl ana_group_set group=1 state=non-optimized >>"$logdir/ana-connect.log" 2>&1
	ctl ana_peers_set peers=127.0.0.1:$ana_port interval_ms=250 >>"$logdir/ana-connect.log" 2>&1
	check ana-roles-swapped wait_for 10 sh -c "[ \"\$(cat /sys/class/nvme/$ana_b_ctrl/nvme*c*n1/ana_state)\" = optimized ] && [ \"\$(cat /sys/class/nvme/$ana_a_ctrl/nvme*c*n1/ana_state)\" = non-optimized ]"
	nvme ana-log "/dev/$ana_a_ctrl" >"$logdir/ana-log-before.txt" 2>&1
	check ana-log-a-non-optimized grep -qE 'state[[:space:]]*:[[:space:]]*non-optimized' "$logdir/ana-log-before.txt"
	ana_nvdev=${NVDEV#/dev/}
	ana_fio "$NVDEV" "$logdir/ana-fio-nvme.log" &
	ana_fio_pid=$!
	# kill once fio is writing (a few thousand writes done)
	ana_w0=$(ana_writes "$ana_nvdev")
	wait_for 60 sh -c "[ \$(awk '{print \$5}' /sys/block/$ana_nvdev/stat) -gt $((ana_w0 + 2000)) ]" >/dev/null
	ana_b_kill
	check ana-takeover wait_for 15 ana_ctrl_is "$ana_a_ctrl" optimized
	echo "ana: this gateway took over at ${SECONDS}s"
	nvme ana-log "/dev/$ana_a_ctrl" >"$logdir/ana-log-takeover.txt" 2>&1
	check ana-log-a-optimized grep -qE 'state[[:space:]]*:[[:space:]]*optimized' "$logdir/ana-log-takeover.txt"
	ctl ana_group_list >"$logdir/ana-group-list-takeover.json" 2>&1
	check ana-peer-down python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
g = next(g for g in d["groups"] if g["group"] == 1)
assert g["state"] == "optimized" and g["configured"] == "non-optimized", g
assert d["peers"] and not d["peers"][0]["up"], d["peers"]' "$logdir/ana-group-list-takeover.json"
	ana_b_config optimized
	check ana-second-gateway-restarted ana_b_start
	# the host reconnects by itself; this gateway sees the peer answer and gives the group back
	check ana-failback wait_for 30 sh -c "[ \"\$(cat /sys/class/nvme/$ana_b_ctrl/nvme*c*n1/ana_state)\" = optimized ] && [ \"\$(cat /sys/class/nvme/$ana_a_ctrl/nvme*c*n1/ana_state)\" = non-optimized ]"
	echo "ana: failback seen at ${SECONDS}s"
	nvme ana-log "/dev/$ana_a_ctrl" >"$logdir/ana-log-failback.txt" 2>&1
	check ana-log-a-non-optimized-again grep -qE 'state[[:space:]]*:[[:space:]]*non-optimized' "$logdir/ana-log-failback.txt"
	wait "$ana_fio_pid"
	ana_fio_rc=$?
	echo "ana: NVMe fio done (rc $ana_fio_rc) at ${SECONDS}s"
	check ana-fio-nvme-verified sh -c "[ $ana_fio_rc = 0 ] && grep -q 'err= 0' '$logdir/ana-fio-nvme.log'"
	check ana-fio-nvme-no-verify-error ana_fio_clean "$logdir/ana-fio-nvme.log"
	nvme disconnect -d "$ana_b_ctrl" >>"$logdir/ana-connect.log" 2>&1
	ctl ana_peers_set >>"$logdir/ana-connect.log" 2>&1
	ctl ana_group_set group=1 state=optimized >>"$logdir/ana-connect.log" 2>&1
fi

# --- automatic takeover over iSCSI: dm-multipath (ALUA handler) over both portals
ana_sd_of_port() { # PORT -> sdX of the iSCSI session on 127.0.0.1:PORT
	iscsiadm -m session -P 3 2>/dev/null | awk -v p="127.0.0.1:$1," '
		/Current Portal:/ { cur = index($0, p) > 0 }
		cur && /Attached scsi disk/ { print $4; exit }'
}
ana_rtpg() { # sdX OUT -> sg_rtpg's decoded answer (retried past the unit attention)
	sg_rtpg -d "/dev/$1" >"$2" 2>&1 || sg_rtpg -d "/dev/$1" >"$2" 2>&1
}
ana_rtpg_is() { # sdX STATE-REGEX
	ana_rtpg "$1" "$logdir/ana-rtpg.tmp" && grep -qiE "access state.*\($2\)" "$logdir/ana-rtpg.tmp"
}
if [ -z "$ana_pid" ] || ! kill -0 "$ana_pid" 2>/dev/null || [ -z "$SD" ]; then
	: # gateway 2 or the iSCSI host is missing: reported above
elif ! modprobe dm-multipath 2>/dev/null || ! modprobe scsi_dh_alua 2>/dev/null; then
	slate_result SKIP e2e-cross.ana-dm-multipath "" "no dm-multipath or scsi_dh_alua module"
else
	export DM_DISABLE_UDEV=1 # no udev in the VM: dmsetup makes the device nodes itself
	ana_ctl ana_group_set group=1 state=optimized >>"$logdir/ana-iscsi.log" 2>&1
	ctl ana_group_set group=1 state=non-optimized >>"$logdir/ana-iscsi.log" 2>&1
	ctl ana_peers_set peers=127.0.0.1:$ana_port interval_ms=250 >>"$logdir/ana-iscsi.log" 2>&1
	# gateway 2's path: a dead session fails its commands over after 3 s (default 120 s)
	{
		iscsiadm -m discovery -t sendtargets -p "127.0.0.1:$ana_iport"
		iscsiadm -m node -T "$XIQN" -p "127.0.0.1:$ana_iport" -o update \
			-n node.session.timeo.replacement_timeout -v 3
		iscsiadm -m node -T "$XIQN" -p "127.0.0.1:$ana_iport" --login
	} >>"$logdir/ana-iscsi.log" 2>&1
	wait_for 10 sh -c "iscsiadm -m session -P 3 | grep -q 'Attached scsi disk'" >/dev/null
	wait_for 10 ana_sd_of_port "$ana_iport" >/dev/null
	ana_sda=${SD#/dev/}
	ana_sdb=$(ana_sd_of_port "$ana_iport")
	echo "ana: iSCSI paths $ana_sda (this gateway) and ${ana_sdb:-none} (gateway 2) at ${SECONDS}s"
	check ana-iscsi-two-paths test -n "$ana_sdb" -a "$ana_sdb" != "$ana_sda"
	check ana-rtpg-a-non-optimized wait_for 10 ana_rtpg_is "$ana_sda" 'active/non.optimized'
	check ana-rtpg-b-optimized wait_for 10 ana_rtpg_is "$ana_sdb" 'active/optimized'
	ana_mp_table="0 $(blockdev --getsz "$SD") multipath 0 1 alua 2 1 round-robin 0 1 1 $(cat "/sys/block/$ana_sdb/dev") 1000 round-robin 0 1 1 $(cat "/sys/block/$ana_sda/dev") 1000"
	echo "$ana_mp_table" >>"$logdir/ana-iscsi.log"
	check ana-dm-multipath dmsetup create slate-ana --table "$ana_mp_table"
	ana_dm=dm-$(dmsetup info -c --noheadings -o minor slate-ana 2>/dev/null | tr -d ' ')
	dmsetup status slate-ana >>"$logdir/ana-iscsi.log" 2>&1
	if [ -b /dev/mapper/slate-ana ]; then
		ana_fio /dev/mapper/slate-ana "$logdir/ana-fio-iscsi.log" &
		ana_fio_pid=$!
		ana_w0=$(ana_writes "$ana_dm")
		wait_for 60 sh -c "[ \$(awk '{print \$5}' /sys/block/$ana_dm/stat) -gt $((ana_w0 + 2000)) ]" >/dev/null
		ana_b_kill
		check ana-rtpg-takeover wait_for 15 ana_rtpg_is "$ana_sda" 'active/optimized'
		cp "$logdir/ana-rtpg.tmp" "$logdir/ana-rtpg-takeover.txt"
		echo "ana: this gateway took over (iSCSI) at ${SECONDS}s"
		dmsetup status slate-ana >>"$logdir/ana-iscsi.log" 2>&1
		# dm-multipath failed gateway 2's path and goes on through this gateway's
		check ana-dm-path-failed wait_for 15 sh -c "dmsetup status slate-ana | grep -q '$(cat "/sys/block/$ana_sdb/dev") F'"
		check ana-second-gateway-restarted-iscsi ana_b_start
		check ana-rtpg-failback wait_for 30 ana_rtpg_is "$ana_sda" 'active/non.optimized'
		cp "$logdir/ana-rtpg.tmp" "$logdir/ana-rtpg-failback.txt"
		echo "ana: failback seen (iSCSI) at ${SECONDS}s"
		wait "$ana_fio_pid"
		ana_fio_rc=$?
		echo "ana: iSCSI fio done (rc $ana_fio_rc) at ${SECONDS}s"
		check ana-fio-iscsi-verified sh -c "[ $ana_fio_rc = 0 ] && grep -q 'err= 0' '$logdir/ana-fio-iscsi.log'"
		check ana-fio-iscsi-no-verify-error ana_fio_clean "$logdir/ana-fio-iscsi.log"
		dmsetup status slate-ana >>"$logdir/ana-iscsi.log" 2>&1
	fi
	dmsetup remove slate-ana >>"$logdir/ana-iscsi.log" 2>&1
	iscsiadm -m node -T "$XIQN" -p "127.0.0.1:$ana_iport" --logout >>"$logdir/ana-iscsi.log" 2>&1
	iscsiadm -m node -T "$XIQN" -p "127.0.0.1:$ana_iport" -o delete >>"$logdir/ana-iscsi.log" 2>&1
	ctl ana_peers_set >>"$logdir/ana-iscsi.log" 2>&1
	ctl ana_group_set group=1 state=optimized >>"$logdir/ana-iscsi.log" 2>&1
fi
[ -n "$ana_pid" ] && kill -TERM "$ana_pid" 2>/dev/null && wait "$ana_pid" 2>/dev/null
