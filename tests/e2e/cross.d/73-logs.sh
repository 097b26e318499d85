# tests/e2e/cross.d/73-logs.sh — sourced by tests/e2e/cross-linux.sh.
# Statistics and health log pages, counted for real (issue 15), as
# sg3_utils and nvme-cli read them from the Linux hosts:
#   - `sg_logs -a` / `-A` decode every page we list (00h, 0Dh, 0Eh, 10h,
#     15h/03h, 19h, 2Fh);
#   - LPS Misalignment (15h/03h): writes made with `sg_dd` (SG_IO, one
#     WRITE(10) each) at odd LBAs and with an odd length on "shared" (512-byte
#     logical, 4 KiB physical blocks) raise the count by exactly what was
#     sent and list those LBAs; aligned ones do not;
#   - General Statistics and Performance (19h): read commands and logical
#     blocks transmitted grow by exactly what `sg_dd` read;
#   - Start-Stop Cycle Counter (0Eh): `sg_start --stop` then `--start`
#     adds one cycle;
#   - SEND DIAGNOSTIC: `sg_senddiag --test` (default self-test) passes; a
#     background extended self-test (`sg_senddiag --selftest=2`) ends
#     "completed without error" in `sg_logs -p 0x10`; one on a paced
#     scratch LU aborted with `--selftest=4` reads "aborted by SEND
#     DIAGNOSTIC";
#   - NVMe: `nvme device-self-test -s 1` / `-s 2` and `nvme self-test-log`
#     (binary, decoded here) show the results; Self-test Code Fh aborts;
#     the per-namespace SMART log counts the namespace's reads;
#   - a self-test over a failed element (`slatectl element stbad 2 failed`)
#     reports its first LBA: sg_logs -p 0x10 (first segment failed, ADDRESS
#     OF FIRST FAILURE, MEDIUM ERROR 11h) and 2Fh (0Bh/03h); nvme
#     self-test-log (failed segment, NSID, Failing LBA, SCT 2h / SC 81h);
#   - malformed LOG SENSE / SEND DIAGNOSTIC / Device Self-test get
#     ILLEGAL REQUEST, INVALID FIELD IN CDB and Invalid Field in Command.

logs_hctl() { basename "$(readlink -f "/sys/block/${SD#/dev/}/device")"; }
logs_sd_lun() {
	local hctl d
	hctl=$(logs_hctl)
	for d in /sys/class/scsi_device/"${hctl%:*}:$1"/device/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}
logs_drain_ua() { for _ in 1 2 3 4; do sg_turs "$1" >/dev/null 2>&1; done; }
# A log page, raw: logs_raw DEV PAGE[,SUBPAGE] OUT
logs_raw() { sg_logs -p "$2" -r "$1" >"$3"; }
# Big-endian field of a raw page: logs_be FILE OFFSET LEN
logs_be() { echo $((16#$(od -An -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n')0 / 16)); }
# Poll CMD once a second, at most SECS times (each poll may itself be slow in the VM).
logs_wait() {
	local n=$1
	shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
		n=$((n - 1))
	done
	"$@"
}

logs_all() {
	sg_logs -a "$SD" >"$state/logs-a.txt" 2>&1
	sg_logs -A "$SD" >"$state/logs-A.txt" 2>&1
	cat "$state/logs-A.txt"
	local p
	for p in 'Temperature' 'Start-stop cycle' 'Self-test results' 'General statistics' \
		'Informational exceptions'; do
		grep -qi "$p" "$state/logs-a.txt" || { echo "sg_logs -a: no '$p'"; return 1; }
	done
	grep -qi 'misalignment' "$state/logs-A.txt" || { echo "sg_logs -A: no LPS misalignment"; return 1; }
	sg_logs "$SD" | tee "$state/logs-list.txt"
	grep -qi '0x15,0x3\|0x15.*0x03\|LPS misalignment' "$state/logs-list.txt" || true
	# Temperature: not available (FFh), our choice, shown as such.
	grep -i -A1 'temperature' "$state/logs-a.txt" | head -4
}
check logs-sg-logs-all logs_all

# LPS Misalignment: count at bytes 10-11, LBAs in 12-byte parameters from byte 12.
logs_lpsm() {
	logs_raw "$SD" 0x15,0x3 "$state/lpsm.bin" || return 1
	logs_be "$state/lpsm.bin" 10 2
}
logs_lpsm_lbas() {
	python3 - "$state/lpsm.bin" <<'PY'
import sys
d = open(sys.argv[1], 'rb').read()
n = int.from_bytes(d[2:4], 'big') + 4
off = 12
while off + 12 <= n:
    print(int.from_bytes(d[off + 4:off + 12], 'big'))
    off += 12
PY
}
logs_misaligned() {
	local before after lba want="" n=0
	before=$(logs_lpsm) || return 1
	sg_logs -p 0x15,0x3 "$SD"
	# Odd LBAs (not the first of a 4 KiB physical block), one block each; the
	# data written is what was there (read first), so nothing changes.
	for lba in 1001 2003 3005 4007 5009; do
		sg_dd if="$SD" iflag=sgio skip=$lba bs=512 count=1 of="$state/blk.bin" 2>/dev/null || return 1
		sg_dd if="$state/blk.bin" of="$SD" oflag=sgio seek=$lba bs=512 count=1 2>/dev/null || return 1
		want="$want $lba" n=$((n + 1))
	done
	# Aligned LBA, odd length (3 blocks): misaligned too.
	sg_dd if="$SD" iflag=sgio skip=8000 bs=512 count=3 of="$state/blk3.bin" 2>/dev/null || return 1
	sg_dd if="$state/blk3.bin" of="$SD" oflag=sgio seek=8000 bs=512 count=3 2>/dev/null || return 1
	want="$want 8000" n=$((n + 1))
	# Aligned: LBA 8192, 8 blocks: not counted.
	sg_dd if="$SD" iflag=sgio skip=8192 bs=512 count=8 of="$state/blk8.bin" 2>/dev/null || return 1
	sg_dd if="$state/blk8.bin" of="$SD" oflag=sgio seek=8192 bs=512 count=8 2>/dev/null || return 1
	after=$(logs_lpsm) || return 1
	sg_logs -p 0x15,0x3 "$SD"
	echo "LPS misalignment count: $before -> $after, sent $n misaligned writes"
	[ $((after - before)) = "$n" ] || return 1
	logs_lpsm_lbas >"$state/lpsm-lbas.txt"
	for lba in $want; do
		grep -qx "$lba" "$state/lpsm-lbas.txt" || { echo "LBA $lba not listed"; return 1; }
	done
	! grep -qx 8192 "$state/lpsm-lbas.txt"
}
check logs-lps-misalignment-sg-dd logs_misaligned

# General Statistics and Performance, parameter 0001h: read commands at 8,
# logical blocks transmitted at 32 (8 bytes each).
logs_gsp() {
	local r0 t0 r1 t1
	logs_raw "$SD" 0x19 "$state/gsp0.bin" || return 1
	r0=$(logs_be "$state/gsp0.bin" 8 8) t0=$(logs_be "$state/gsp0.bin" 32 8)
	for _ in 1 2 3; do
		sg_dd if="$SD" iflag=sgio skip=16384 bs=512 count=8 of=/dev/null 2>/dev/null || return 1
	done
	logs_raw "$SD" 0x19 "$state/gsp1.bin" || return 1
	r1=$(logs_be "$state/gsp1.bin" 8 8) t1=$(logs_be "$state/gsp1.bin" 32 8)
	sg_logs -p 0x19 "$SD"
	echo "read commands $r0 -> $r1, blocks transmitted $t0 -> $t1 (sent 3 reads of 8 blocks)"
	[ $((r1 - r0)) = 3 ] && [ $((t1 - t0)) = 24 ]
}
check logs-general-statistics logs_gsp

# Start-Stop Cycle Counter: accumulated start-stop cycles (parameter 0004h) at 36.
logs_start_stop() {
	local c0 c1
	logs_raw "$SD" 0xe "$state/ssc0.bin" || return 1
	c0=$(logs_be "$state/ssc0.bin" 36 4)
	sg_start --stop "$SD" || return 1
	sg_start --start "$SD" || return 1
	logs_drain_ua "$SD"
	logs_raw "$SD" 0xe "$state/ssc1.bin" || return 1
	c1=$(logs_be "$state/ssc1.bin" 36 4)
	sg_logs -p 0xe "$SD"
	echo "accumulated start-stop cycles $c0 -> $c1"
	[ $((c1 - c0)) = 1 ]
}
check logs-start-stop-cycles logs_start_stop

# Self-Test Results, parameter 0001h (the newest): code and result at byte 8.
logs_st_newest() { # DEV -> "code result"
	logs_raw "$1" 0x10 "$state/st.bin" || return 1
	local b
	b=$(logs_be "$state/st.bin" 8 1)
	echo "$((b >> 5)) $((b & 15))"
}
logs_st_done() { [ "$(logs_st_newest "$1" | cut -d' ' -f2)" != 15 ]; }
logs_senddiag() {
	sg_senddiag --test "$SD" || { echo "default self-test failed"; return 1; }
	echo "default self-test: passed"
	sg_senddiag --selftest=2 "$SD" || return 1
	logs_wait 300 logs_st_done "$SD" || return 1
	sg_logs -p 0x10 "$SD" | head -20
	echo "newest self-test (code result): $(logs_st_newest "$SD")"
	[ "$(logs_st_newest "$SD")" = "2 0" ]
}
check logs-senddiag-extended-selftest logs_senddiag

LOGS_SD=
logs_scratch() {
	local hctl h c t
	ctl namespace_create name=stlog backend=mem size=32M selftest_rate_mibps=1 || return 1
	ctl iscsi_lun_map target="$XIQN" lun=3 namespace=stlog || return 1
	ctl nvmf_ns_attach nqn="$XNQN" namespace=stlog nsid=4 || return 1
	logs_drain_ua "$SD"
	hctl=$(logs_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t 3" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 logs_sd_lun 3 || { echo "LUN 3 did not appear"; return 1; }
	LOGS_SD=$(logs_sd_lun 3)
	echo "LUN 3 (self-tests paced at 1 MiB/s): $LOGS_SD"
}
check logs-scratch-lun logs_scratch

logs_abort() {
	[ -b "$LOGS_SD" ] || return 1
	sg_senddiag --selftest=2 "$LOGS_SD" || return 1
	echo "running: $(logs_st_newest "$LOGS_SD")"
	[ "$(logs_st_newest "$LOGS_SD")" = "2 15" ] || return 1
	# A second self-test while one runs is refused.
	if sg_senddiag --selftest=1 "$LOGS_SD" 2>"$state/st-busy.txt"; then
		echo "second self-test accepted"
		return 1
	fi
	cat "$state/st-busy.txt"
	sg_senddiag --selftest=4 "$LOGS_SD" || return 1
	logs_wait 60 logs_st_done "$LOGS_SD" || return 1
	sg_logs -p 0x10 "$LOGS_SD" | head -12
	echo "after abort: $(logs_st_newest "$LOGS_SD")"
	[ "$(logs_st_newest "$LOGS_SD")" = "2 1" ]
}
check logs-senddiag-abort logs_abort

# NVMe Device Self-test log, binary: current operation at 0, then 28-byte results from 4.
# (nvme-cli 2.3's `self-test-log -o binary` prints nothing: the raw page comes from get-log.)
logs_dst() { nvme get-log "$NVCTRL" --log-id=6 --log-len=564 --raw-binary >"$state/dst.bin" 2>/dev/null; }
logs_dst_idle() { logs_dst && [ "$(od -An -tu1 -j0 -N1 "$state/dst.bin" | tr -d ' ')" = 0 ]; }
logs_dst_newest() { # -> "code result nsid_valid"
	local b v
	b=$(od -An -tu1 -j4 -N1 "$state/dst.bin" | tr -d ' ')
	v=$(od -An -tu1 -j6 -N1 "$state/dst.bin" | tr -d ' ')
	echo "$((b >> 4)) $((b & 15)) $v"
}
logs_nvme_dst() {
	local id
	id=$(nvme id-ctrl "$NVCTRL" -o json) || return 1
	echo "$id" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("oacs=%#x dsto=%s edstt=%s lpa=%#x" % (d["oacs"], d.get("dsto"), d.get("edstt"), d["lpa"]))'
	[ $(($(echo "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["oacs"])') & 0x10)) = 16 ] || return 1
	nvme device-self-test "$NVCTRL" -n 1 -s 1 || return 1
	logs_wait 300 logs_dst_idle || return 1
	nvme self-test-log "$NVCTRL" | head -20
	echo "short: $(logs_dst_newest)"
	[ "$(logs_dst_newest)" = "1 0 0" ] || return 1
	nvme device-self-test "$NVCTRL" -n 1 -s 2 || return 1
	logs_wait 300 logs_dst_idle || return 1
	echo "extended: $(logs_dst_newest)"
	[ "$(logs_dst_newest)" = "2 0 0" ]
}
check logs-nvme-device-self-test logs_nvme_dst

logs_nvme_abort() {
	nvme device-self-test "$NVCTRL" -n 4 -s 2 || return 1
	logs_dst || return 1
	echo "running: operation $(od -An -tu1 -j0 -N1 "$state/dst.bin" | tr -d ' '), $(od -An -tu1 -j1 -N1 "$state/dst.bin" | tr -d ' ')%"
	[ "$(od -An -tu1 -j0 -N1 "$state/dst.bin" | tr -d ' ')" = 2 ] || return 1
	# A second one while it runs: Device Self-test In Progress.
	if nvme device-self-test "$NVCTRL" -n 1 -s 1 2>"$state/dst-busy.txt"; then
		echo "second device self-test accepted"
		return 1
	fi
	cat "$state/dst-busy.txt"
	nvme device-self-test "$NVCTRL" -s 0xf || return 1
	logs_wait 60 logs_dst_idle || return 1
	echo "after abort: $(logs_dst_newest)"
	[ "$(logs_dst_newest)" = "2 1 0" ]
}
check logs-nvme-device-self-test-abort logs_nvme_abort

# SMART / Health per namespace (LPA bit 0): Host Read Commands at 64 (16 bytes LE).
logs_smart_ns() {
	local r0 r1
	nvme smart-log "$NVCTRL" -n 4 | grep -i 'host_read_commands\|Host Read Commands' || return 1
	nvme get-log "$NVCTRL" -n 4 --log-id=2 --log-len=512 --raw-binary >"$state/smart0.bin" || return 1
	r0=$(od -An -tu8 -j64 -N8 "$state/smart0.bin" | tr -d ' ')
	for _ in 1 2 3 4; do
		sg_dd if="$LOGS_SD" iflag=sgio skip=64 bs=512 count=8 of=/dev/null 2>/dev/null || return 1
	done
	nvme get-log "$NVCTRL" -n 4 --log-id=2 --log-len=512 --raw-binary >"$state/smart1.bin" || return 1
	nvme smart-log "$NVCTRL" -n 4 | grep -i 'host_read_commands\|Host Read Commands'
	r1=$(od -An -tu8 -j64 -N8 "$state/smart1.bin" | tr -d ' ')
	echo "NSID 4 host read commands $r0 -> $r1 (4 reads sent over iSCSI to the same namespace)"
	[ $((r1 - r0)) = 4 ]
}
check logs-nvme-smart-per-namespace logs_smart_ns

logs_malformed() {
	local out=$state/bad.txt
	# LOG SENSE of a page we do not have (0Fh), and with SP=1.
	sg_raw -R "$SD" 4d 00 4f 00 00 00 00 02 00 00 >"$out" 2>&1
	grep -qi 'invalid field in cdb' "$out" || { cat "$out"; return 1; }
	sg_raw -R "$SD" 4d 01 4d 00 00 00 00 02 00 00 >"$out" 2>&1
	grep -qi 'invalid field in cdb' "$out" || { cat "$out"; return 1; }
	# SEND DIAGNOSTIC: SELFTEST=1 with a SELF-TEST CODE; reserved code 011b; abort when idle.
	sg_raw "$SD" 1d 24 00 00 00 00 >"$out" 2>&1
	grep -qi 'invalid field in cdb' "$out" || { cat "$out"; return 1; }
	sg_raw "$SD" 1d 60 00 00 00 00 >"$out" 2>&1
	grep -qi 'invalid field in cdb' "$out" || { cat "$out"; return 1; }
	sg_raw "$SD" 1d 80 00 00 00 00 >"$out" 2>&1
	grep -qi 'invalid field in cdb' "$out" || { cat "$out"; return 1; }
	# Device Self-test: reserved code 3h, reserved bits, an NSID that is not there.
	! nvme device-self-test "$NVCTRL" -n 1 -s 3 >"$out" 2>&1 || { cat "$out"; return 1; }
	grep -qi 'invalid field\|INVALID_FIELD' "$out" || { cat "$out"; return 1; }
	! nvme admin-passthru "$NVCTRL" --opcode=0x14 --namespace-id=1 --cdw10=0x101 >"$out" 2>&1 || return 1
	grep -qi 'invalid field\|INVALID_FIELD' "$out" || { cat "$out"; return 1; }
	! nvme device-self-test "$NVCTRL" -n 77 -s 1 >"$out" 2>&1 || return 1
	grep -qi 'invalid namespace\|INVALID_NS' "$out" || { cat "$out"; return 1; }
	echo "malformed LOG SENSE / SEND DIAGNOSTIC / Device Self-test refused"
}
check logs-malformed-refused logs_malformed

# A self-test on a namespace with a failed element (the media model, core/media.h):
# "stbad", 16 MiB, 4 elements interleaved by 2048 blocks, element 2 failed:
# its first LBA is 2048.  LUN 4 of $XIQN and NSID 5 of $XNQN.
LOGS_BAD=
logs_bad_setup() {
	local hctl h c t
	ctl namespace_create name=stbad backend=mem size=16M elements=4 element_interleave=2048 || return 1
	ctl iscsi_lun_map target="$XIQN" lun=4 namespace=stbad || return 1
	ctl nvmf_ns_attach nqn="$XNQN" namespace=stbad nsid=5 || return 1
	logs_drain_ua "$SD"
	hctl=$(logs_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t 4" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 logs_sd_lun 4 || { echo "LUN 4 did not appear"; return 1; }
	LOGS_BAD=$(logs_sd_lun 4)
	ctl element stbad 2 failed || return 1
	logs_drain_ua "$LOGS_BAD"
	echo "LUN 4 (element 2 of 4 failed): $LOGS_BAD"
}
check logs-failed-element-setup logs_bad_setup

logs_bad_scsi() {
	[ -b "$LOGS_BAD" ] || return 1
	# The default self-test fails: HARDWARE ERROR, LOGICAL UNIT FAILED SELF-TEST.
	if sg_senddiag --test "$LOGS_BAD" >"$state/st-default.txt" 2>&1; then
		echo "default self-test passed over a failed element"
		return 1
	fi
	cat "$state/st-default.txt"
	sg_senddiag --selftest=2 "$LOGS_BAD" || return 1
	logs_wait 120 logs_st_done "$LOGS_BAD" || return 1
	sg_logs -p 0x10 "$LOGS_BAD" | head -12
	logs_raw "$LOGS_BAD" 0x10 "$state/stbad.bin" || return 1
	local res addr key asc
	res=$(logs_st_newest "$LOGS_BAD") addr=$(logs_be "$state/stbad.bin" 12 8)
	key=$(logs_be "$state/stbad.bin" 20 1) asc=$(logs_be "$state/stbad.bin" 21 1)
	echo "newest: code/result $res, first failure at LBA $addr, sense key $key, ASC $asc"
	[ "$res" = "2 5" ] && [ "$addr" = 2048 ] && [ "$key" = 3 ] && [ "$asc" = 17 ] || return 1
	sg_logs -p 0x2f "$LOGS_BAD"
	logs_raw "$LOGS_BAD" 0x2f "$state/iebad.bin" || return 1
	[ "$(logs_be "$state/iebad.bin" 8 1)" = 11 ] && [ "$(logs_be "$state/iebad.bin" 9 1)" = 3 ]
}
check logs-failed-element-scsi-selftest logs_bad_scsi

logs_bad_nvme() {
	nvme device-self-test "$NVCTRL" -n 5 -s 2 || return 1
	logs_wait 120 logs_dst_idle || return 1
	nvme self-test-log "$NVCTRL" | head -16
	local nsid flba sct sc
	nsid=$(od -An -tu4 -j16 -N4 "$state/dst.bin" | tr -d ' ')
	flba=$(od -An -tu8 -j20 -N8 "$state/dst.bin" | tr -d ' ')
	sct=$(od -An -tu1 -j28 -N1 "$state/dst.bin" | tr -d ' ')
	sc=$(od -An -tu1 -j29 -N1 "$state/dst.bin" | tr -d ' ')
	echo "newest: $(logs_dst_newest) (code result valid-bits), NSID $nsid, failing LBA $flba, SCT $sct SC $sc"
	[ "$(logs_dst_newest)" = "2 7 15" ] && [ "$nsid" = 5 ] && [ "$flba" = 2048 ] &&
		[ "$sct" = 2 ] && [ "$sc" = 129 ]
}
check logs-failed-element-nvme-self-test logs_bad_nvme

logs_bad_teardown() {
	ctl element stbad 2 ok || return 1
	[ -n "$LOGS_BAD" ] && echo 1 >"/sys/block/${LOGS_BAD#/dev/}/device/delete"
	ctl iscsi_lun_unmap target="$XIQN" lun=4 || return 1
	ctl nvmf_ns_detach nqn="$XNQN" nsid=5 || return 1
	logs_drain_ua "$SD"
	ctl namespace_delete name=stbad
}
check logs-failed-element-removed logs_bad_teardown

logs_teardown() {
	[ -n "$LOGS_SD" ] && echo 1 >"/sys/block/${LOGS_SD#/dev/}/device/delete"
	ctl iscsi_lun_unmap target="$XIQN" lun=3 || return 1
	ctl nvmf_ns_detach nqn="$XNQN" nsid=4 || return 1
	logs_drain_ua "$SD"
	ctl namespace_delete name=stlog
}
check logs-scratch-removed logs_teardown
