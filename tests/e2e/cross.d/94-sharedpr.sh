# tests/e2e/cross.d/94-sharedpr.sh — sourced by tests/e2e/cross-linux.sh.
# Reservations across gateways with Linux's own clients (issue 14 evidence
# 3, README "Reservations across gateways"): this slated and a second one
# (gateway_id 2, started like 93's with gw2_start) export one file with
# shared_reservations=true as LUN 0 of their own iSCSI target and NSID 1 of
# their own subsystem (the one namespace of its controllers, so nvme-cli
# can address each controller: NVMe multipath hides the per-path devices).
# open-iscsi logs in through both portals (two sessions, two disks) and the
# kernel's NVMe host connects to both (two controllers of one subsystem).
#   - sg_persist registers and reserves (Write Exclusive) through gateway
#     1's session; READ KEYS and READ RESERVATION through gateway 2's show
#     them; a write through gateway 2's session (another I_T nexus: its
#     relative target port is gateway 2's) gets RESERVATION CONFLICT, a read
#     passes, a write through gateway 1's passes; a release through gateway
#     1 is seen through gateway 2, whose write then passes.
#   - nvme resv-register / resv-acquire through gateway 1's controller,
#     resv-report through gateway 2's shows the key holding the
#     reservation; the iSCSI write through gateway 2 conflicts; the release
#     through gateway 2's controller is seen through gateway 1's.
# The negative control: CROSS_NAME=sharedpr-off runs it with
# shared_reservations=false on both gateways, and its checks must fail:
#   CROSS_NAME=sharedpr CROSS_PARTS='94-*' tests/e2e/cross-linux.sh
#   CROSS_NAME=sharedpr-off CROSS_PARTS='94-*' tests/e2e/cross-linux.sh
# About 65 s of VM time (measured: the second ASan slated starts in ~20 s,
# two iSCSI logins and two NVMe connects take ~20 s, the checks ~18 s).
# make test runs it (the state half of e2e_cross, patterns '[1-6]*,90-pi-*,9[1-9]-*'): make
# test took 24 min on the last clean clone, so there is room for it, where
# 93's three minutes keep 93 opt-in.

spr_b=/tmp/slate-e2e-cross-spr
spr_iport=3262
spr_nport=4422
spr_nqn=nqn.2026-12.io.slate:crosspr
spr_iqn=iqn.2026-12.io.slate:crosspr
spr_shared=true
case $logdir in *sharedpr-off*) spr_shared=false ;; esac
echo "sharedpr: shared_reservations=$spr_shared"
spr_ctl() { "$SLATE_BUILD/slatectl" -s "$spr_b/run/slated.sock" "$@"; }
spr_ns='"name": "spr", "backend": "file", "path": "'$state/spr.img'", "block_size": 512, "shared_reservations": '$spr_shared

spr_setup_a() { # the namespace, subsystem and target on this gateway
	{
	ctl namespace_create name=spr backend=file path="$state/spr.img" size=16M block_size=512 \
		shared_reservations=$spr_shared &&
		ctl nvmf_subsystem_create nqn=$spr_nqn &&
		ctl nvmf_subsystem_add_host nqn=$spr_nqn host='*' &&
		ctl nvmf_ns_attach nqn=$spr_nqn nsid=1 namespace=spr &&
		ctl iscsi_target_create name=$spr_iqn &&
		ctl iscsi_lun_map target=$spr_iqn lun=0 namespace=spr
	} >>"$logdir/sharedpr-setup.log" 2>&1
}
spr_sd_of() { # PORT -> sdX of the session with $spr_iqn on 127.0.0.1:PORT
	iscsiadm -m session -P 3 2>/dev/null | awk -v t="$spr_iqn" -v p="127.0.0.1:$1," '
		/^Target:/ { tgt = ($2 == t) }
		/Current Portal:/ { cur = tgt && index($0, p) > 0 }
		cur && /Attached scsi disk/ { print $4; exit }'
}
spr_ctrl_of() { # PORT -> nvmeN of the controller of $spr_nqn through 127.0.0.1:PORT
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$spr_nqn" ] || continue
		grep -q "trsvcid=$1\b" "$c/address" 2>/dev/null && { echo "${c##*/}"; return 0; }
	done
	return 1
}
spr_login() { # PORT
	iscsiadm -m discovery -t sendtargets -p "127.0.0.1:$1" &&
		iscsiadm -m node -T "$spr_iqn" -p "127.0.0.1:$1" --login
}
# A one-block write (or read) through SG_IO, so the SCSI status is printed.
spr_write() { sg_dd if=/dev/zero of="/dev/$1" bs=512 count=1 oflag=sgio,direct 2>&1; }
spr_read() { sg_dd if="/dev/$1" of=/dev/null bs=512 count=1 iflag=sgio,direct 2>&1; }
spr_tur() { sg_turs "/dev/$1" >/dev/null 2>&1; sg_turs "/dev/$1" >/dev/null 2>&1; } # unit attentions

rm -rf "$spr_b"
mkdir -p "$spr_b/run"
gw2_pid=
spr_sda= spr_sdb= spr_na= spr_nb=
if check sharedpr-setup spr_setup_a; then
	# gateway 2: the same file and identity (a copy of the metadata, as 93)
	cp "$state/run/spr.meta.json" "$spr_b/run/spr.meta.json"
	cat >"$spr_b/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"], "gateway_id": 2}, "config": [
  {"method": "namespace_create", "params": {$spr_ns}},
  {"method": "nvmf_subsystem_create", "params": {"nqn": "$spr_nqn"}},
  {"method": "nvmf_subsystem_add_host", "params": {"nqn": "$spr_nqn", "host": "*"}},
  {"method": "nvmf_ns_attach", "params": {"nqn": "$spr_nqn", "nsid": 1, "namespace": "spr"}},
  {"method": "iscsi_target_create", "params": {"name": "$spr_iqn"}},
  {"method": "iscsi_lun_map", "params": {"target": "$spr_iqn", "lun": 0, "namespace": "spr"}},
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": $spr_iport}},
  {"method": "nvmf_listener_add", "params": {"addr": "127.0.0.1", "port": $spr_nport}}
]}
JSON
	check sharedpr-second-gateway gw2_start "$spr_b/run" "$spr_b/slate.json" "$spr_nport" "$logdir/slated-spr.log"
	echo "sharedpr: second gateway up at ${SECONDS}s"
	{
		spr_login "$ISCSI_PORT"
		spr_login "$spr_iport"
		nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$spr_nqn"
		nvme connect -t tcp -a 127.0.0.1 -s "$spr_nport" -n "$spr_nqn"
		wait_for 10 spr_sd_of "$ISCSI_PORT"
		wait_for 10 spr_sd_of "$spr_iport"
		wait_for 10 spr_ctrl_of "$PORT"
		wait_for 10 spr_ctrl_of "$spr_nport"
	} >>"$logdir/sharedpr-setup.log" 2>&1
	spr_sda=$(spr_sd_of "$ISCSI_PORT") spr_sdb=$(spr_sd_of "$spr_iport")
	spr_na=$(spr_ctrl_of "$PORT") spr_nb=$(spr_ctrl_of "$spr_nport")
	echo "sharedpr: iSCSI $spr_sda (gateway 1) ${spr_sdb:-none} (gateway 2), NVMe $spr_na / ${spr_nb:-none} at ${SECONDS}s"
	check sharedpr-hosts test -n "$spr_sda" -a -n "$spr_sdb" -a "$spr_sda" != "$spr_sdb" -a -n "$spr_na" -a -n "$spr_nb"
fi

SPRKEY=0x5a11
NVPRKEY=0x7e57

spr_scsi() {
	spr_tur "$spr_sda"
	spr_tur "$spr_sdb"
	sg_persist --out --register --param-sark=$SPRKEY "/dev/$spr_sda" || return 1
	sg_persist --out --reserve --param-rk=$SPRKEY --prout-type=1 "/dev/$spr_sda" || return 1
	local out
	sg_persist --in -k "/dev/$spr_sdb" >"$state/spr-k.txt" 2>&1
	cat "$state/spr-k.txt"
	grep -qi "$SPRKEY" "$state/spr-k.txt" || { echo "gateway 2's READ KEYS lacks $SPRKEY"; return 1; }
	sg_persist --in -r "/dev/$spr_sdb" >"$state/spr-r.txt" 2>&1
	cat "$state/spr-r.txt"
	grep -qi "key=$SPRKEY" "$state/spr-r.txt" && grep -qi 'write exclusive' "$state/spr-r.txt" ||
		{ echo "gateway 2's READ RESERVATION does not show the Write Exclusive"; return 1; }
	out=$(spr_write "$spr_sdb")
	echo "write through gateway 2 under gateway 1's reservation: $out"
	echo "$out" | grep -qi 'reservation conflict' || return 1
	spr_read "$spr_sdb" || { echo "read through gateway 2 refused"; return 1; }
	out=$(spr_write "$spr_sda") || { echo "the holder's write through gateway 1: $out"; return 1; }
	sg_persist --out --release --param-rk=$SPRKEY --prout-type=1 "/dev/$spr_sda" || return 1
	sg_persist --in -r "/dev/$spr_sdb" >"$state/spr-r2.txt" 2>&1
	cat "$state/spr-r2.txt"
	grep -qi 'no reservation' "$state/spr-r2.txt" || { echo "gateway 2 still shows a reservation"; return 1; }
	spr_tur "$spr_sdb"
	out=$(spr_write "$spr_sdb") || { echo "write through gateway 2 after the release: $out"; return 1; }
	sg_persist --out --register --param-rk=$SPRKEY "/dev/$spr_sda" # unregister (SARK 0)
	sg_persist --in -k "/dev/$spr_sdb" | grep -qi 'no registered' || { echo "gateway 2 still shows keys"; return 1; }
}

spr_nvme() {
	nvme resv-register "/dev/$spr_na" -n 1 -k $NVPRKEY -r 0 || return 1
	nvme resv-acquire "/dev/$spr_na" -n 1 -c $NVPRKEY -t 1 -a 0 || return 1 # Write Exclusive
	nvme resv-report "/dev/$spr_nb" -n 1 --eds >"$state/spr-rr.txt" 2>&1
	cat "$state/spr-rr.txt"
	grep -qiE 'rtype[[:space:]]*:[[:space:]]*1\b' "$state/spr-rr.txt" &&
		grep -qi "${NVPRKEY#0x}" "$state/spr-rr.txt" &&
		grep -qiE 'rcsts[[:space:]]*:[[:space:]]*(0x)?1\b' "$state/spr-rr.txt" ||
		{ echo "gateway 2's resv-report does not show the holder"; return 1; }
	local out
	spr_tur "$spr_sdb"
	out=$(spr_write "$spr_sdb")
	echo "iSCSI write through gateway 2 under the NVMe reservation taken through gateway 1: $out"
	echo "$out" | grep -qi 'reservation conflict' || return 1
	# the same host releases through the other gateway; gateway 1 sees it
	nvme resv-release "/dev/$spr_nb" -n 1 -c $NVPRKEY -t 1 -a 0 || return 1
	nvme resv-report "/dev/$spr_na" -n 1 --eds >"$state/spr-rr2.txt" 2>&1
	cat "$state/spr-rr2.txt"
	grep -qiE 'rtype[[:space:]]*:[[:space:]]*0\b' "$state/spr-rr2.txt" ||
		{ echo "gateway 1's resv-report still shows a reservation"; return 1; }
	nvme resv-register "/dev/$spr_nb" -n 1 -c $NVPRKEY -r 1 || return 1 # unregister
	nvme resv-report "/dev/$spr_na" -n 1 --eds >"$state/spr-rr3.txt" 2>&1
	cat "$state/spr-rr3.txt"
	! grep -qi "${NVPRKEY#0x}" "$state/spr-rr3.txt" || { echo "gateway 1 still shows the key"; return 1; }
}

if [ -n "$spr_sda" ] && [ -n "$spr_sdb" ] && [ -n "$spr_na" ] && [ -n "$spr_nb" ]; then
	check sharedpr-scsi-across-gateways spr_scsi
	check sharedpr-nvme-across-gateways spr_nvme
	echo "sharedpr: checks done at ${SECONDS}s; what the clients printed through gateway 2:"
	for f in spr-k spr-r spr-rr spr-rr2; do
		[ -f "$state/$f.txt" ] && grep -iE '0x|key|reserv|rtype|rcsts|regctl|exclusive' "$state/$f.txt" | sed "s/^/    $f: /"
	done
fi
{
	nvme disconnect -n "$spr_nqn"
	iscsiadm -m node -T "$spr_iqn" -p "127.0.0.1:$spr_iport" --logout
	iscsiadm -m node -T "$spr_iqn" -p "127.0.0.1:$ISCSI_PORT" --logout
	iscsiadm -m node -T "$spr_iqn" -o delete
} >>"$logdir/sharedpr-setup.log" 2>&1
[ -n "$gw2_pid" ] && kill -TERM "$gw2_pid" 2>/dev/null && wait "$gw2_pid" 2>/dev/null
