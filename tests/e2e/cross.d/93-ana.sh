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
# It costs about a minute of VM time on a loaded machine (a second slated
# under ASan, a second controller), so make test's pattern ('[1-69]*') does
# not run it: only a pattern that names it does, e.g.
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

rm -rf "$ana_b"
mkdir -p "$ana_b/run"
cp "$state/run/shared.meta.json" "$ana_b/run/shared.meta.json"
cat >"$ana_b/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"], "gateway_id": 2}, "config": [
  {"method": "namespace_create", "params": {"name": "shared", "backend": "file", "path": "$state/shared.img", "block_size": 512}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$XNQN"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$XNQN", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$XNQN", "nsid": 1, "namespace": "shared"}},
  {"method": "ana_group_set", "params": {"group": 1, "state": "non-optimized"}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $ana_port}}
]}
JSON
ana_keep_pid=$SLATE_PID
SLATE_PID=
echo "ana: starting the second gateway at ${SECONDS}s"
check ana-second-gateway slate_start "$ana_b/run" "$ana_b/slate.json" "$ana_port" "$logdir/slated-b.log"
ana_pid=$SLATE_PID
SLATE_PID=$ana_keep_pid
if [ -z "$ana_pid" ] || ! kill -0 "$ana_pid" 2>/dev/null; then
	: # ana-second-gateway failed: nothing to check
elif [ "$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)" != Y ]; then
	slate_result SKIP e2e-cross.ana-multipath "" "nvme_core.multipath is off in this kernel"
else
	ana_a_cntlid=$(ctl --json nvmf_ctrl_list | python3 -c 'import json,sys
print(next(c["cntlid"] for c in json.load(sys.stdin) if c["subnqn"] == sys.argv[1]))' "$XNQN")
	nvme connect -t tcp -a 127.0.0.1 -s "$ana_port" -n "$XNQN" >"$logdir/ana-connect.log" 2>&1
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
	nvme disconnect -d "$ana_b_ctrl" >>"$logdir/ana-connect.log" 2>&1
fi
[ -n "$ana_pid" ] && kill -TERM "$ana_pid" 2>/dev/null && wait "$ana_pid" 2>/dev/null
