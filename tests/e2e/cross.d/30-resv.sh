# tests/e2e/cross.d/30-resv.sh — sourced by tests/e2e/cross-linux.sh.
# Persistent reservations across protocols, with the kernel's hosts and the
# standard tools: an NVMe reservation (nvme-cli resv-*) seen by the iSCSI
# host through PERSISTENT RESERVE IN (sg_persist) and enforced against its
# writes, then an iSCSI reservation (sg_persist --out) enforced against
# NVMe writes and listed by nvme resv-report, then an NVMe PREEMPT AND ABORT
# of the iSCSI registrant, which the iSCSI host hears of as REGISTRATIONS
# PREEMPTED, and an iSCSI PREEMPT of the NVMe host, which the NVMe host
# reads in its Reservation Notification log page.  Each part leaves the
# namespace without registrations.

NVKEY=0xabc1
SDKEY=0x5c51

nv_resv() { nvme "$@" "$NVDEV" -n 1; }
# A one-block write from the iSCSI host, through SG_IO so the SCSI status is printed.
sd_write() { sg_dd if=/dev/zero of="$SD" bs=512 count=1 oflag=sgio,direct 2>&1; }
nv_write() { nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero 2>&1; }

resv_nvme_to_scsi() {
	sg_turs "$SD" >/dev/null 2>&1 # unit attentions left by earlier parts
	sg_turs "$SD" >/dev/null 2>&1
	nv_resv resv-register -k $NVKEY -r 0 || return 1
	nv_resv resv-acquire -c $NVKEY -t 1 -a 0 || return 1 # Write Exclusive
	nv_resv resv-report --eds >"$state/rr.txt" 2>&1
	cat "$state/rr.txt"
	grep -qi "${NVKEY#0x}" "$state/rr.txt" || { echo "resv-report lacks the key"; return 1; }
	# The iSCSI host sees the NVMe host's key and reservation.
	sg_persist --in -k "$SD" >"$state/k.txt" 2>&1
	cat "$state/k.txt"
	grep -qi "$NVKEY" "$state/k.txt" || { echo "READ KEYS lacks $NVKEY"; return 1; }
	sg_persist --in -r "$SD" >"$state/r.txt" 2>&1
	cat "$state/r.txt"
	grep -qi "key=$NVKEY" "$state/r.txt" && grep -qi 'write exclusive' "$state/r.txt" ||
		{ echo "READ RESERVATION does not show the NVMe host's Write Exclusive"; return 1; }
	# An unregistered iSCSI host may read but not write.
	sg_dd if="$SD" of=/dev/null bs=512 count=1 iflag=sgio,direct || { echo "read refused"; return 1; }
	local out
	out=$(sd_write)
	echo "iSCSI write under the NVMe reservation: $out"
	if echo "$out" | grep -qi 'reservation conflict'; then :; else return 1; fi
	nv_resv resv-release -c $NVKEY -t 1 -a 0 || return 1
	out=$(sd_write) || { echo "iSCSI write after release: $out"; return 1; }
	nv_resv resv-register -c $NVKEY -r 1 # unregister
}
check resv-nvme-to-scsi resv_nvme_to_scsi

resv_scsi_to_nvme() {
	sg_persist --out --register --param-sark=$SDKEY "$SD" || return 1
	sg_persist --out --reserve --param-rk=$SDKEY --prout-type=1 "$SD" || return 1
	local out
	out=$(nv_write)
	echo "NVMe write under the iSCSI reservation: $out"
	echo "$out" | grep -qi 'reservation.conflict\|0x83\b\|0x4083' || return 1
	# Reads pass (Write Exclusive).
	nvme read "$NVDEV" -s 0 -c 0 -z 512 -d /dev/null || { echo "NVMe read refused"; return 1; }
	nv_resv resv-report --eds >"$state/rr2.txt" 2>&1
	cat "$state/rr2.txt"
	grep -qi "${SDKEY#0x}" "$state/rr2.txt" || { echo "resv-report lacks the SCSI registrant"; return 1; }
	sg_persist --out --release --param-rk=$SDKEY --prout-type=1 "$SD" || return 1
	out=$(nv_write) || { echo "NVMe write after release: $out"; return 1; }
	sg_persist --out --register --param-rk=$SDKEY "$SD" # unregister (SARK 0)
}
check resv-scsi-to-nvme resv_scsi_to_nvme

# PREEMPT AND ABORT by the NVMe host of the iSCSI host's reservation: the
# core publishes the preemption, the SCSI side sets REGISTRATIONS PREEMPTED.
resv_preempt_across() {
	sg_persist --out --register --param-sark=$SDKEY "$SD" || return 1
	sg_persist --out --reserve --param-rk=$SDKEY --prout-type=1 "$SD" || return 1
	sg_turs "$SD" >/dev/null 2>&1
	nv_resv resv-register -k $NVKEY -r 0 || return 1
	nv_resv resv-acquire -c $NVKEY -p $SDKEY -t 1 -a 2 || return 1 # preempt and abort
	sg_turs "$SD" >"$state/ua2.txt" 2>&1
	cat "$state/ua2.txt"
	grep -qi 'registrations preempted' "$state/ua2.txt" || return 1
	sg_persist --in -k "$SD" >"$state/k2.txt" 2>&1
	cat "$state/k2.txt"
	grep -qi "$NVKEY" "$state/k2.txt" && ! grep -qi "$SDKEY" "$state/k2.txt" || return 1
	nv_resv resv-release -c $NVKEY -a 1 || return 1 # clear
	sg_persist --in -k "$SD" | grep -qi 'no registered' || { echo "registrations left"; return 1; }
	nv_write
}
check resv-preempt-across resv_preempt_across

# The reverse preemption: an iSCSI PREEMPT of the NVMe host's reservation
# reaches the NVMe host as a Reservation Notification (log page 80h,
# Registration Preempted for NSID 1) after its asynchronous event.
nv_log80() { nvme get-log "$NVCTRL" -i 0x80 -l 64 -b | od -An -tx1 -v | tr -s ' \n' ' '; }
resv_notify_nvme() {
	nv_log80 >/dev/null 2>&1 # drop anything queued before
	nv_resv resv-register -k $NVKEY -r 0 || return 1
	nv_resv resv-acquire -c $NVKEY -t 1 -a 0 || return 1
	sg_turs "$SD" >/dev/null 2>&1
	sg_persist --out --register --param-sark=$SDKEY "$SD" || return 1
	sg_persist --out --preempt --param-rk=$SDKEY --param-sark=$NVKEY --prout-type=1 "$SD" || return 1
	local log out
	log=$(nv_log80) || return 1
	echo "log page 80h: $log"
	# bytes 0-7 count (non-zero), 8 type 01h, 12-15 NSID 1
	set -- $log
	[ "$9" = 01 ] && [ "${13}" = 01 ] && [ "$1$2$3$4$5$6$7$8" != 0000000000000000 ] || return 1
	out=$(nv_write)
	echo "NVMe write after being preempted: $out"
	echo "$out" | grep -qi 'reservation.conflict' || return 1
	sg_persist --out --clear --param-rk=$SDKEY "$SD" || return 1
	nv_write
}
check resv-notify-nvme resv_notify_nvme
