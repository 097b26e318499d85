# tests/e2e/cross.d/70-media-nvme.sh — sourced by tests/e2e/cross-linux.sh.
# Failing media as the Linux NVMe host and nvme-cli see it (core/media.h,
# issue 15):
#   - `slatectl media shared mark` makes blocks unrecoverable: Get LBA
#     Status (ATYPE 11h, tracked) lists them; a read of one fails with
#     Unrecovered Read Error (SCT 2h SC 81h) through nvme-cli and through
#     the kernel, which logs a medium error at that sector; the Error
#     Information log has the entry (LBA, NSID, status) and the SMART
#     media errors grow by exactly what the core counted;
#   - with AEC bit 13 enabled, a mark reaches the kernel as the LBA Status
#     Information Alert (it logs the notice it does not handle);
#   - `nvme write-uncor` marks blocks, reads fail, a write heals them and
#     reads return the new data;
#   - `slatectl element shared 2 failed`: its LBAs are untracked (ATYPE
#     11h shows none, log 0Eh gives ESTULB and recommends 10h, LSGC moves),
#     ATYPE 10h scans and lists them; reads fail, writes fail (Write Fault);
#   - the Persistent Event log (0Dh) with a reporting context has the
#     hardware-error (media) and SMART snapshot events; reading without a
#     context is a Command Sequence Error, a bad action an Invalid Field;
#   - depopulating the element shrinks the namespace by its share: the
#     kernel sees the new size (Namespace Attribute Changed) and the log
#     has a Change Namespace event; everything survives a restart of
#     slated; restore brings the capacity back;
#   - malformed Write Uncorrectable (past the end) is LBA Out of Range.
# Leaves the namespace as it found it (no element model, no marks).

md_nsze() { nvme id-ns "$NVDEV" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nsze"])'; }
md_media() { # md_media PYEXPR -> value from namespace_list "media" of shared
	ctl --json namespace_list | python3 -c "import json,sys
m = [n for n in json.load(sys.stdin) if n['name'] == 'shared'][0]['media']
print($1)"
}
md_u32() { od -An -tu4 -j "$2" -N 4 "$1" | tr -d ' '; }
md_u64() { od -An -tu8 -j "$2" -N 8 "$1" | tr -d ' '; }
md_u8() { od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' '; }
md_u16() { od -An -tu2 -j "$2" -N 2 "$1" | tr -d ' '; }
# Get LBA Status through admin-passthru (see 52-lbastatus.sh): ATYPE SLBA OUT
md_lbas() {
	nvme admin-passthru "$NVCTRL" --opcode=0x86 --namespace-id=1 --cdw10=$(($2 & 0xffffffff)) \
		--cdw11=$(($2 >> 32)) --cdw12=63 --cdw13=$(($1 << 24)) --data-len=256 --read \
		--raw-binary >"$3"
}
md_smart_media() { nvme smart-log "$NVCTRL" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["media_errors"])'; }
md_dev() { basename "$NVDEV"; }
# A one-block O_DIRECT read/write through the kernel's block device.
md_kread() { dd if="$NVDEV" of=/dev/null bs=512 skip="$1" count="${2:-1}" iflag=direct 2>&1; }
md_kwrite() { # LBA COUNT BYTE
	python3 -c "import sys; sys.stdout.buffer.write(bytes([$3]) * 512 * $2)" >"$state/md-pat.bin"
	dd if="$state/md-pat.bin" of="$NVDEV" bs=512 seek="$1" count="$2" oflag=direct conv=notrunc 2>&1
}

md_setup() {
	ctl namespace_set name=shared elements=4 element_interleave=2048 || return 1
	echo "elements $(md_media 'm["elements"]'), interleave $(md_media 'm["element_interleave"]')"
	[ "$(md_media 'm["elements"]')" = 4 ] && [ "$(md_media 'm["element"][1]["capacity_blocks"]')" = $(($(md_nsze) / 4)) ]
}
check media-element-model md_setup

md_mark_read() {
	local out=$state/md-lbas.bin smart0 core0 smart1 core1
	smart0=$(md_smart_media)
	core0=$(md_media 'm["stats"]["media_errors"]')
	ctl media shared mark 1000 8 || return 1
	md_lbas 0x11 0 "$out" || return 1
	echo "ATYPE 11h: NLSD $(md_u32 "$out" 0) DSLBA $(md_u64 "$out" 8) NLB $(md_u32 "$out" 16)"
	[ "$(md_u32 "$out" 0)" = 1 ] && [ "$(md_u64 "$out" 8)" = 1000 ] && [ "$(md_u32 "$out" 16)" = 8 ] || return 1
	nvme get-lba-status "$NVCTRL" -n 1 -a 0x11 -m 15 2>&1 | head -5
	# nvme-cli's read: the status it names
	if nvme read "$NVDEV" -s 1003 -c 0 -z 512 -d /dev/null >"$state/md-read.txt" 2>&1; then
		echo "read of a marked block succeeded"
		return 1
	fi
	cat "$state/md-read.txt"
	grep -qi 'unrecovered read\|0x281\|0x4281' "$state/md-read.txt" || return 1
	# the kernel's read: an I/O error at that sector in dmesg
	dmesg -C
	if md_kread 1004; then
		echo "kernel read of a marked block succeeded"
		return 1
	fi
	dmesg | grep -i "nvme\|medium\|I/O error" | tail -5
	dmesg | grep -Eq "(medium error|I/O error), dev $(md_dev | sed 's/n[0-9]*$//')[c0-9]*n1, sector 1004 " || return 1
	# its neighbours read
	md_kread 999 >/dev/null && md_kread 1008 >/dev/null || return 1
	# the Error Information log has it
	nvme error-log "$NVCTRL" -e 16 -o json >"$state/md-errlog.json" || return 1
	python3 - "$state/md-errlog.json" <<'PY' || return 1
import json, sys
log = json.load(open(sys.argv[1]))
ents = log.get("errors", log if isinstance(log, list) else [])
hits = [e for e in ents if e.get("lba") in (1003, 1004) and e.get("nsid") == 1]
for e in hits:
    print("error-log: lba", e["lba"], "nsid", e["nsid"], "status", hex(e["status_field"]))
ok = [e for e in hits if (e["status_field"] & 0x7ff) == 0x281 or ((e["status_field"] >> 1) & 0x7ff) == 0x281]
sys.exit(0 if len(ok) >= 2 else 1)
PY
	smart1=$(md_smart_media)
	core1=$(md_media 'm["stats"]["media_errors"]')
	echo "SMART media errors $smart0 -> $smart1; core $core0 -> $core1"
	[ $((smart1 - smart0)) -ge 2 ] && [ $((smart1 - smart0)) = $((core1 - core0)) ]
}
check nvme-unrecovered-read md_mark_read

# The LBA Status Information Alert (AEC bit 13): Linux does not enable it
# itself; with it enabled (nvme set-feature), the kernel's parked
# Asynchronous Event Request completes with it and the kernel logs the
# notice it does not handle: type 2h, information 05h, log page 0Eh.
md_dmesg_has() { dmesg | grep -q "$1"; }
md_lsin_aen() {
	nvme set-feature "$NVCTRL" -f 0x0b -v $((0x2100)) || return 1
	nvme lba-status-log "$NVCTRL" >/dev/null || return 1 # RAE 0: unmasked
	dmesg -C
	ctl media shared mark 7 1 >/dev/null || return 1
	wait_for 20 md_dmesg_has 'async event result 000e0502' || { dmesg | tail -5; return 1; }
	dmesg | grep 'async event result'
	ctl media shared clear 7 1 >/dev/null
}
check nvme-lba-status-alert md_lsin_aen

md_write_uncor() {
	local out=$state/md-lbas.bin
	nvme write-uncor "$NVDEV" -n 1 -s 5000 -c 3 || return 1
	md_lbas 0x11 4096 "$out" || return 1
	echo "after write-uncor: NLSD $(md_u32 "$out" 0) DSLBA $(md_u64 "$out" 8) NLB $(md_u32 "$out" 16)"
	[ "$(md_u64 "$out" 8)" = 5000 ] && [ "$(md_u32 "$out" 16)" = 4 ] || return 1
	if md_kread 5002 >/dev/null; then
		echo "read after write-uncor succeeded"
		return 1
	fi
	md_kwrite 5000 4 0x6b || return 1
	md_kread 5000 4 >/dev/null || return 1
	local got
	got=$(dd if="$NVDEV" bs=512 skip=5003 count=1 iflag=direct 2>/dev/null | od -An -tx1 -N 4 | tr -d ' ')
	echo "after the healing write: block 5003 starts $got"
	[ "$got" = 6b6b6b6b ] || return 1
	md_lbas 0x11 4096 "$out" || return 1
	[ "$(md_u64 "$out" 8)" != 5000 ] # no longer listed
}
check nvme-write-uncor-heal md_write_uncor

md_write_uncor_bad() {
	local nsze
	nsze=$(md_nsze)
	if nvme write-uncor "$NVDEV" -n 1 -s "$nsze" -c 0 >"$state/md-wu.txt" 2>&1; then
		echo "write-uncor past the end accepted"
		return 1
	fi
	cat "$state/md-wu.txt"
	grep -qi 'lba out of range\|0x80\b\|0x4080\|LBA_RANGE' "$state/md-wu.txt"
}
check nvme-write-uncor-range md_write_uncor_bad

md_log_gen() { nvme lba-status-log "$NVCTRL" -o binary >"$state/md-log.bin" && md_u16 "$state/md-log.bin" 14; }

md_element_failed() {
	local out=$state/md-lbas.bin g0 g1 log=$state/md-log.bin
	g0=$(md_log_gen)
	ctl element shared 2 failed || return 1
	g1=$(md_log_gen)
	echo "log 0Eh: LSGC $g0 -> $g1, NLSLNE $(md_u32 "$log" 4), ESTULB $(md_u32 "$log" 8), RATYPE $(md_u8 "$log" 24)"
	[ "$g0" != "$g1" ] && [ "$(md_u32 "$log" 8)" = $(($(md_nsze) / 4)) ] && [ "$(md_u8 "$log" 24)" = 16 ] || return 1
	# tracked only: the mark at 1000, not the element's stripes
	md_lbas 0x11 2000 "$out" || return 1
	echo "ATYPE 11h from 2000: NLSD $(md_u32 "$out" 0)"
	[ "$(md_u32 "$out" 0)" = 0 ] || return 1
	# scan and report: stripe units 1, 5, 9 ... of 2048 blocks
	md_lbas 0x10 2000 "$out" || return 1
	echo "ATYPE 10h from 2000: NLSD $(md_u32 "$out" 0), first $(md_u64 "$out" 8)+$(md_u32 "$out" 16), second $(md_u64 "$out" 24)"
	[ "$(md_u64 "$out" 8)" = 2048 ] && [ "$(md_u32 "$out" 16)" = 2048 ] && [ "$(md_u64 "$out" 24)" = 10240 ] || return 1
	md_log_gen >/dev/null
	echo "after the scan: ESTULB $(md_u32 "$log" 8), RATYPE $(md_u8 "$log" 24)"
	[ "$(md_u32 "$log" 8)" = 0 ] && [ "$(md_u8 "$log" 24)" = 17 ] || return 1
	dmesg -C
	if md_kread 2050 >/dev/null; then
		echo "read on the failed element succeeded"
		return 1
	fi
	dmesg | grep -Eq "(medium error|I/O error), dev .*, sector 2050 " || { dmesg | tail -5; return 1; }
	if nvme write "$NVDEV" -s 10240 -c 0 -z 512 -d "$state/md-pat.bin" >"$state/md-w.txt" 2>&1; then
		echo "write to the failed element succeeded"
		return 1
	fi
	cat "$state/md-w.txt"
	grep -qi 'write fault\|0x280\|0x4280' "$state/md-w.txt"
}
check nvme-element-failed-lba-status md_element_failed

md_pel() {
	local bin=$state/md-pel.bin
	nvme persistent-event-log "$NVCTRL" -a 1 || return 1
	nvme persistent-event-log "$NVCTRL" -a 0 -l 4096 >"$state/md-pel.txt" 2>&1 || { cat "$state/md-pel.txt"; return 1; }
	grep -i 'Total Number of Events\|Event Type\|Hardware Error\|SMART' "$state/md-pel.txt" | head -12
	nvme persistent-event-log "$NVCTRL" -a 0 -l 4096 -b >"$bin" || return 1
	python3 - "$bin" <<'PY' || return 1
import struct, sys
b = open(sys.argv[1], "rb").read()
lid, tnev, tll = b[0], struct.unpack_from("<I", b, 4)[0], struct.unpack_from("<Q", b, 8)[0]
print("LID %#x TNEV %d TLL %d" % (lid, tnev, tll))
off, types, hw = 512, [], []
for i in range(tnev):
    et, ehl = b[off], b[off + 2]
    el = struct.unpack_from("<H", b, off + 22)[0]
    data = b[off + ehl + 3: off + ehl + 3 + el]
    types.append(et)
    if et == 5:
        hw.append(struct.unpack_from("<H", data, 0)[0])
    off += ehl + 3 + el
print("event types", types, "hardware error codes", hw)
ok = lid == 0x0d and off == tll and 5 in types and 1 in types and 0x0a in hw
# the SMART snapshot follows the hardware error and has the critical warning bit 2
i = types.index(5)
sys.exit(0 if ok and types[i + 1] == 1 else 1)
PY
	grep -qi 'Hardware Error' "$state/md-pel.txt" || return 1
	nvme persistent-event-log "$NVCTRL" -a 2 || return 1
	# without a context: Command Sequence Error
	if nvme persistent-event-log "$NVCTRL" -a 0 -l 4096 >"$state/md-pel-noctx.txt" 2>&1; then
		echo "read without a context succeeded"
		return 1
	fi
	cat "$state/md-pel-noctx.txt"
	grep -qi 'sequence\|0xc\b\|0x400c\|0x000c' "$state/md-pel-noctx.txt" || return 1
	# an action that does not exist
	if nvme get-log "$NVCTRL" --log-id=0x0d --log-len=512 --lsp=3 >"$state/md-pel-lsp.txt" 2>&1; then
		echo "LSP 3 accepted"
		return 1
	fi
	cat "$state/md-pel-lsp.txt"
	grep -qi 'invalid field\|0x2\b\|0x4002' "$state/md-pel-lsp.txt"
}
check nvme-persistent-event-log md_pel

md_ksize() { cat "/sys/block/$(md_dev)/size"; }
md_ksize_is() { [ "$(md_ksize)" = "$1" ]; }

md_depop() {
	local before after
	before=$(md_nsze)
	ctl element shared 2 depopulated || return 1
	after=$(md_media 'm["element"][1]["state"]')
	echo "element 2 $after; capacity $before -> $((before * 3 / 4)) expected"
	[ "$after" = depopulated ] || return 1
	wait_for 30 md_ksize_is $((before * 3 / 4)) || return 1
	echo "kernel size $(md_ksize) sectors"
	nvme persistent-event-log "$NVCTRL" -a 1 >/dev/null || return 1
	nvme persistent-event-log "$NVCTRL" -a 0 -l 4096 -b >"$state/md-pel2.bin" || return 1
	nvme persistent-event-log "$NVCTRL" -a 2 >/dev/null
	python3 - "$state/md-pel2.bin" $((before * 3 / 4)) <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
tnev = struct.unpack_from("<I", b, 4)[0]
off, found = 512, False
for i in range(tnev):
    et, ehl = b[off], b[off + 2]
    el = struct.unpack_from("<H", b, off + 22)[0]
    d = b[off + ehl + 3: off + ehl + 3 + el]
    if et == 6:
        nsze, nsid = struct.unpack_from("<Q", d, 8)[0], struct.unpack_from("<I", d, 44)[0]
        print("Change Namespace event: NSID", nsid, "NSZE", nsze)
        found |= nsze == int(sys.argv[2]) and nsid == 1
    off += ehl + 3 + el
sys.exit(0 if found else 1)
PY
}
check nvme-depopulation-capacity md_depop

md_restart() {
	local nsze
	nsze=$(md_nsze)
	slate_stop || return 1
	slate_start "$state/run" "$state/slate.json" "$PORT" "$log" || return 1
	nv_reconnect || return 1
	sd_relogin >/dev/null || return 1
	echo "after the restart: elements $(md_media 'm["elements"]'), element 2 $(md_media 'm["element"][1]["state"]'), nsze $(md_nsze), marked $(md_media 'm["stats"]["marked_blocks"]')"
	[ "$(md_nsze)" = "$nsze" ] && [ "$(md_media 'm["element"][1]["state"]')" = depopulated ] || return 1
	if md_kread 1001 >/dev/null; then
		echo "marked block readable after the restart"
		return 1
	fi
	md_lbas 0x11 0 "$state/md-lbas.bin" || return 1
	[ "$(md_u64 "$state/md-lbas.bin" 8)" = 1000 ]
}
check media-survives-restart md_restart

md_restore() {
	local before
	before=$(md_nsze)
	ctl element shared 2 ok || return 1
	wait_for 30 md_ksize_is $((before * 4 / 3)) || return 1
	echo "restored: kernel size $(md_ksize) sectors"
	ctl media shared clear 0 "$(md_nsze)" || return 1
	ctl namespace_set name=shared elements=0 || return 1
	# The iSCSI host learns the capacity back only by a rescan (the NVMe host by its event).
	echo 1 >"/sys/block/${SD#/dev/}/device/rescan"
	wait_for 10 test "$(blockdev --getsz "$SD")" = "$(md_nsze)" ||
		{ echo "iSCSI host sees $(blockdev --getsz "$SD") sectors after the restore"; return 1; }
	md_kread 1000 8 >/dev/null && [ "$(md_media 'm["unrecoverable_blocks"]')" = 0 ]
}
check media-restore-and-clean md_restore
