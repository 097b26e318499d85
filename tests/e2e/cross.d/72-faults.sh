# tests/e2e/cross.d/72-faults.sh — sourced by tests/e2e/cross-linux.sh.
# Fault injection (core/fault.h, RPC fault_set) against the Linux hosts:
#   - a fraction of reads fails with medium-error: on the iSCSI disk
#     (MEDIUM ERROR, ASC 11h, which the SCSI midlayer does not retry) and on
#     the NVMe namespace (Unrecovered Read Error, which nvme-core retries up
#     to 5 times, so the fraction there is higher); dd sees EIO for some
#     reads and not for others, the target counted at least as many hits
#     as dd saw failures, and the kernel logs "critical medium error" for
#     the device at sectors inside the rule's LBA range;
#   - added latency: a read with 300 ms injected takes at least 300 ms as
#     dd measures it (a lower bound only: nothing here can be too slow);
#   - a dropped connection (drop rule, once): the initiators reconnect by
#     themselves and the next read returns the data written before.
# Each check clears its rules (fault_clear all=true) so later parts see a
# healthy device.

FLT_LBA=409600 # 200 MiB in: a region no other part uses
FLT_N=16       # 4 KiB reads (the VM is slow: each NVMe failure is retried 5 times)

flt_hits() { ctl --json fault_list | python3 -c 'import json,sys; print(sum(r["hits"] for r in json.load(sys.stdin)))'; }

# flt_reads DEV [N] -> number of the first N (default FLT_N) 4 KiB direct reads that failed
flt_reads() {
	local dev=$1 n=${2:-$FLT_N} i f=0
	for i in $(seq 0 $((n - 1))); do
		dd if="$dev" of=/dev/null bs=4096 count=1 skip=$((FLT_LBA / 8 + i)) iflag=direct \
			2>/dev/null || f=$((f + 1))
	done
	echo "$f"
}

# flt_fraction NAME DEV TRANSPORT PER_MILLE
flt_fraction() {
	local dev=$2 tr=$3 pm=$4 kdev=${2#/dev/} before fails hits kre
	# The kernel names the NVMe path device (nvme0c0n1) under native multipath.
	kre=$(echo "$kdev" | sed -E 's/^(nvme[0-9]+)n([0-9]+)$/\1(c[0-9]+)?n\2/')
	before=$(dmesg | wc -l)
	ctl fault_clear all=true >/dev/null
	ctl fault_set namespace=shared transport="$tr" ops=read status=medium-error \
		per_mille="$pm" seed=7 lba_first=$FLT_LBA lba_last=$((FLT_LBA + FLT_N * 8 - 1)) || return 1
	fails=$(flt_reads "$dev")
	hits=$(flt_hits)
	ctl --json fault_list
	ctl fault_clear all=true >/dev/null
	echo "$tr: $fails of $FLT_N reads failed with EIO; the target injected $hits errors"
	dmesg | tail -n +"$((before + 1))" | grep -m6 -E "$kre|medium|I/O error" || true
	[ "$fails" -gt 0 ] && [ "$fails" -lt "$FLT_N" ] && [ "$hits" -ge "$fails" ] || return 1
	# The kernel logged medium errors for this device (blk_update_request).
	dmesg | tail -n +"$((before + 1))" | grep -qE "critical medium error, dev $kre," || return 1
	# ... at sectors inside the faulted range only.
	dmesg | tail -n +"$((before + 1))" | grep -E "critical medium error, dev $kre," |
		sed -E 's/.*, sector ([0-9]+).*/\1/' | while read -r sec; do
		[ "$sec" -ge "$FLT_LBA" ] && [ "$sec" -lt $((FLT_LBA + FLT_N * 8)) ] ||
			{ echo "medium error logged at sector $sec, outside the rule's range"; exit 1; }
	done || return 1
	# With the rule gone reads succeed again.
	[ "$(flt_reads "$dev" 4)" = 0 ]
}
# Earlier parts may have changed the capacity: the iSCSI host sees it after a rescan.
echo 1 >"/sys/block/${SD#/dev/}/device/rescan" 2>/dev/null
sg_turs "$SD" >/dev/null 2>&1 || sg_turs "$SD" >/dev/null 2>&1
# Prepare the region (zeroes are fine: the point is the status).
dd if=/dev/zero of="$NVDEV" bs=1M count=1 seek=$((FLT_LBA / 2048)) oflag=direct 2>/dev/null
check faults-iscsi-fraction-medium-error flt_fraction iscsi "$SD" iscsi 500
check faults-nvme-fraction-medium-error flt_fraction nvme "$NVDEV" nvme 900

# flt_latency DEV TRANSPORT: one read with 300 ms injected takes >= 300 ms.
flt_latency() {
	local dev=$1 tr=$2 t0 t1 ms
	ctl fault_clear all=true >/dev/null
	ctl fault_set namespace=shared transport="$tr" ops=read latency_us=300000 count=1 \
		lba_first=$FLT_LBA lba_last=$((FLT_LBA + 7)) || return 1
	t0=$(date +%s%N)
	dd if="$dev" of=/dev/null bs=4096 count=1 skip=$((FLT_LBA / 8)) iflag=direct 2>/dev/null || return 1
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000))
	ctl --json fault_list
	local hits
	hits=$(flt_hits)
	ctl fault_clear all=true >/dev/null
	echo "$tr: the read with 300 ms injected took $ms ms (hits $hits)"
	[ "$hits" = 1 ] && [ "$ms" -ge 300 ]
}
check faults-iscsi-latency flt_latency "$SD" iscsi
check faults-nvme-latency flt_latency "$NVDEV" nvme

# flt_drop DEV TRANSPORT: the connection is dropped at its next PDU; the
# host reconnects by itself and reads the data written before.
flt_drop() {
	local dev=$1 tr=$2 pat=$state/flt.pat got=$state/flt.got drops0 drops1 conn0 conn1 hits
	head -c 4096 /dev/urandom >"$pat"
	dd if="$pat" of="$dev" bs=4096 count=1 seek=$((FLT_LBA / 8 + 100)) oflag=direct 2>/dev/null || return 1
	drops0=$(grep -c 'fault injection: connection dropped' "$log")
	if [ "$tr" = iscsi ]; then
		conn0=$(grep -c 'login ok: .* normal session' "$log")
	else
		conn0=$(grep -c ' connected: host ' "$log")
	fi
	ctl fault_clear all=true >/dev/null
	ctl fault_set drop=true transport="$tr" || return 1
	# The next PDU (this read, or a keep-alive/NOP before it) is the last one.
	dd if="$dev" of="$got" bs=4096 count=1 skip=$((FLT_LBA / 8 + 100)) iflag=direct 2>&1 || return 1
	hits=$(flt_hits)
	ctl --json fault_list
	ctl fault_clear all=true >/dev/null
	drops1=$(grep -c 'fault injection: connection dropped' "$log")
	if [ "$tr" = iscsi ]; then
		conn1=$(grep -c 'login ok: .* normal session' "$log")
	else
		conn1=$(grep -c ' connected: host ' "$log")
	fi
	echo "$tr: drops $drops0 -> $drops1, connections logged $conn0 -> $conn1, rule hits $hits"
	grep 'fault' "$log" | tail -n 3
	[ "$hits" = 1 ] && [ "$drops1" -gt "$drops0" ] && [ "$conn1" -gt "$conn0" ] && cmp "$pat" "$got"
}
check faults-iscsi-drop-reconnect flt_drop "$SD" iscsi
check faults-nvme-drop-reconnect flt_drop "$NVDEV" nvme
