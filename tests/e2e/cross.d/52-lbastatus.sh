# tests/e2e/cross.d/52-lbastatus.sh — sourced by tests/e2e/cross-linux.sh.
# NVMe Get LBA Status (86h) and the LBA Status Information log (0Eh) as
# nvme-cli sends them, and the OPTPERF fields Linux reads:
#   - `nvme id-ctrl` OACS bit 9; `nvme id-ns` NSFEAT OPTPERF with
#     NPWG/NPWA/NPDG/NPDA/NOWS = the backing file system's block (4 KiB)
#     in 512-byte blocks, 0's based (7), and the kernel's io_min from NPWG;
#   - Get LBA Status with ATYPE 10h and 11h (nvme admin-passthru, see
#     lbas_get): no descriptor (nothing is unrecoverable), completion
#     condition 2 (the whole range was examined); `nvme get-lba-status` with
#     ATYPE 02h and with an SLBA past the end is refused with Invalid Field
#     and LBA Out of Range; `nvme lba-status-log`: a 16-byte page, no element.

# Raw little-endian fields of a binary answer: lba_u32 FILE BYTE_OFFSET
lba_u32() { od -An -tu4 -j "$2" -N 4 "$1" | tr -d ' '; }
lba_u8() { od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' '; }

lbas_optperf() {
	nvme id-ns "$NVDEV" -o json >"$state/idns.json" || return 1
	local f v
	for f in npwg npwa npdg npda nows; do
		v=$(python3 -c "import json; print(json.load(open('$state/idns.json'))['$f'])")
		echo "$f=$v"
		[ "$v" = 7 ] || return 1
	done
	v=$(python3 -c "import json; print(json.load(open('$state/idns.json'))['nsfeat'])")
	echo "nsfeat=$v io_min=$(cat "/sys/block/${NVDEV#/dev/}/queue/minimum_io_size")"
	[ $((v & 0x10)) = 16 ] && [ "$(cat "/sys/block/${NVDEV#/dev/}/queue/minimum_io_size")" = 4096 ]
}
check nvme-optperf-npdg lbas_optperf

lbas_oacs() {
	local oacs
	oacs=$(nvme id-ctrl "$NVCTRL" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["oacs"])')
	echo "oacs=$oacs"
	[ $((oacs & 0x200)) = 512 ]
}
check nvme-oacs-get-lba-status lbas_oacs

# Get LBA Status through nvme-cli's admin-passthru with the data length the
# command transfers: (MNDW + 1) dwords.  nvme-cli 2.3's own get-lba-status
# (libnvme 1.3) sends the command without a data buffer, which a fabrics
# target must refuse (Data SGL Length Invalid, as Linux nvmet does); its
# field checks come first, so it still shows the refusals below.
lbas_get() { # lbas_get ATYPE SLBA MNDW RL OUT
	nvme admin-passthru "$NVCTRL" --opcode=0x86 --namespace-id=1 --cdw10=$(($2 & 0xffffffff)) \
		--cdw11=$(($2 >> 32)) --cdw12="$3" --cdw13=$((($1 << 24) | $4)) \
		--data-len=$((($3 + 1) * 4)) --read --raw-binary >"$5"
}
lbas_command() {
	local a out=$state/lbas.bin
	for a in 0x10 0x11; do
		rm -f "$out"
		lbas_get "$a" 0 255 0 "$out" || return 1
		echo "ATYPE $a: $(stat -c %s "$out") bytes, NLSD $(lba_u32 "$out" 0), CMPC $(lba_u8 "$out" 4)"
		[ "$(stat -c %s "$out")" = 1024 ] && [ "$(lba_u32 "$out" 0)" = 0 ] &&
			[ "$(lba_u8 "$out" 4)" = 2 ] || return 1
		lbas_get "$a" 1000 3 2048 "$out" || return 1
		echo "ATYPE $a, RL 2048 from LBA 1000: NLSD $(lba_u32 "$out" 0), CMPC $(lba_u8 "$out" 4)"
		[ "$(lba_u32 "$out" 0)" = 0 ] && [ "$(lba_u8 "$out" 4)" = 2 ] || return 1
	done
	if nvme get-lba-status "$NVCTRL" -n 1 -a 0x02 -m 15 >"$state/lbas-bad.txt" 2>&1; then
		echo "ATYPE 02h accepted"
		return 1
	fi
	cat "$state/lbas-bad.txt"
	grep -qi 'invalid.field\|INVALID_FIELD\|0x2\b\|0x4002' "$state/lbas-bad.txt" || return 1
	local nsze
	nsze=$(nvme id-ns "$NVDEV" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nsze"])')
	if nvme get-lba-status "$NVCTRL" -n 1 -a 0x11 -m 15 -s "$nsze" >"$state/lbas-range.txt" 2>&1; then
		echo "SLBA past the end accepted"
		return 1
	fi
	cat "$state/lbas-range.txt"
	grep -qi 'lba out of range\|LBA_RANGE\|0x80\b\|0x4080' "$state/lbas-range.txt"
}
check nvme-get-lba-status lbas_command

lbas_log() {
	local out=$state/lbas-log.bin
	nvme lba-status-log "$NVCTRL" | head -6
	nvme lba-status-log "$NVCTRL" -o binary >"$out" || return 1
	echo "log: $(stat -c %s "$out") bytes, LSLPLEN $(lba_u32 "$out" 0), NLSLNE $(lba_u32 "$out" 4), ESTULB $(lba_u32 "$out" 8)"
	[ "$(lba_u32 "$out" 0)" = 16 ] && [ "$(lba_u32 "$out" 4)" = 0 ] && [ "$(lba_u32 "$out" 8)" = 0 ]
}
check nvme-lba-status-log lbas_log
