# tests/e2e/cross.d/90-pi-scsi.sh — sourced by tests/e2e/cross-linux.sh.
# Protection information on the SCSI side (issue 10), with sg3_utils through
# the Linux kernel's SG_IO as the host.  A scratch namespace "pis" (8 MiB
# file, 512-byte blocks, no PI) is iSCSI LUN 9:
#   - `sg_inq` PROTECT=1, `sg_format --format --fmtpinfo=2` formats it with
#     type 1, `sg_readcap -l` shows PROT_EN=1 P_TYPE=0, `sg_vpd -p ei` SPT=7
#     and the three check bits;
#   - a block written with WRPROTECT 000b (the target generates its PI) reads
#     back with RDPROTECT 001b as 520 bytes whose tuple holds application tag
#     0 and reference tag = the LBA; `sg_write_x --wrprotect=1` writes it back
#     (correct guard, application and reference tags: GOOD); with a flipped
#     data bit (wrong guard) it is refused with ABORTED COMMAND, LOGICAL BLOCK
#     GUARD CHECK FAILED (10h/01h), at another LBA (wrong reference tag) with
#     10h/03h, both with the LBA in the information field, and the medium
#     is unchanged;
#   - the Control page's ATMPE on and the Application Tag mode page set
#     (MODE SELECT through sg_raw) with one range of tag 1234h over the whole
#     LU: `sg_modes` shows the page, the block with application tag 0 is
#     refused (10h/02h), with 1234h it is written;
#   - WRITE ATOMIC(16) WRPROTECT 001b (atomic_write_max set at run time): two
#     blocks with their PI land together; a wrong guard in the second one is
#     10h/01h at its LBA and leaves the first block unchanged too;
#   - corruption: a bit flipped in the backing file behind the target's
#     back; READ(16) with RDPROTECT 001b (and 000b) gets 10h/01h with the
#     LBA, not the bad data;
#   - type 2: `sg_format --fmtpinfo=3`, READ CAPACITY P_TYPE=1; WRITE(32)
#     and READ(32) with the expected initial reference tag; a wrong one is
#     10h/03h; RDPROTECT in READ(16) is INVALID COMMAND OPERATION CODE.

PIS_LUN=9
PIS_SD=
pis_t0=$SECONDS
pis_hctl() { basename "$(readlink -f "/sys/block/${SD#/dev/}/device")"; }
pis_sd_lun() {
	local hctl d
	hctl=$(pis_hctl)
	for d in /sys/class/scsi_device/"${hctl%:*}:$1"/device/block/*; do
		[ -e "$d" ] && { echo "/dev/${d##*/}"; return 0; }
	done
	return 1
}
pis_drain_ua() { for _ in 1 2 3 4; do sg_turs "$1" >/dev/null 2>&1; done; }

pis_setup() {
	local hctl h c t
	ctl namespace_create name=pis backend=file path="$state/pis.img" size=8M block_size=512 || return 1
	ctl iscsi_lun_map target="$XIQN" lun=$PIS_LUN namespace=pis || return 1
	pis_drain_ua "$SD"
	hctl=$(pis_hctl)
	h=${hctl%%:*} c=$(echo "$hctl" | cut -d: -f2) t=$(echo "$hctl" | cut -d: -f3)
	echo "$c $t $PIS_LUN" >"/sys/class/scsi_host/host$h/scan"
	wait_for 10 pis_sd_lun $PIS_LUN || { echo "LUN $PIS_LUN did not appear"; return 1; }
	PIS_SD=$(pis_sd_lun $PIS_LUN)
	pis_drain_ua "$PIS_SD"
	echo "pis: iSCSI $PIS_SD"
}
check pi-scsi-setup pis_setup

# pis_py SCRIPT ARGS... — python3 for byte edits of the test's files.
pis_py() { python3 - "$@"; }
# READ(16)/WRITE(16) CDB bytes for one block at LBA with xxPROTECT P.
pis_cdb16() { printf '%02x %02x 00 00 00 00 %02x %02x %02x %02x 00 00 00 01 00 00' "$1" $(($2 << 5)) \
	$(($3 >> 24 & 255)) $(($3 >> 16 & 255)) $(($3 >> 8 & 255)) $(($3 & 255)); }
pis_read() { sg_raw -r "$3" -o "$4" "$PIS_SD" $(pis_cdb16 0x88 "$1" "$2") 2>&1; } # P LBA LEN FILE
pis_write() { sg_raw -s "$3" -i "$4" "$PIS_SD" $(pis_cdb16 0x8a "$1" "$2") 2>&1; } # P LBA LEN FILE
# pis_refused OUT SENSE-TEXT LBA — CHECK CONDITION with that additional sense and INFORMATION = LBA.
pis_refused() {
	echo "$1"
	echo "$1" | grep -qi "aborted command" && echo "$1" | grep -qi "$2" &&
		echo "$1" | grep -qiE "info(rmation)? f(ie)?ld[^0-9a-fx]*0x0*$(printf '%x' "$3")( |$|\])"
}
pis_same() { cmp "$1" "$2"; }

pis_format1() {
	sg_inq "$PIS_SD" | grep -q "Protect=1" || { echo "INQUIRY PROTECT is not 1"; return 1; }
	sg_format --format --fmtpinfo=2 --quick --wait "$PIS_SD" || return 1
	pis_drain_ua "$PIS_SD"
	sg_readcap -l "$PIS_SD" | tee "$state/pis-rc.txt"
	grep -q "prot_en=1, p_type=0, p_i_exponent=0" "$state/pis-rc.txt"
}
check pi-scsi-format-type1 pis_format1

pis_vpd_ei() {
	sg_vpd -p ei "$PIS_SD" | tee "$state/pis-ei.txt"
	grep -q "SPT=7" "$state/pis-ei.txt" && grep -q "GRD_CHK=1" "$state/pis-ei.txt" &&
		grep -q "APP_CHK=1" "$state/pis-ei.txt" && grep -q "REF_CHK=1" "$state/pis-ei.txt"
}
check pi-scsi-vpd-ei pis_vpd_ei

# Block 8: data written plain, read back with its generated PI (520 bytes).
pis_roundtrip() {
	head -c 512 /dev/urandom >"$state/pis-d8"
	pis_write 0 8 512 "$state/pis-d8" || return 1
	pis_read 1 8 520 "$state/pis-b8" || return 1
	head -c 512 "$state/pis-b8" | cmp - "$state/pis-d8" || return 1
	# the tuple: guard (2), application tag 0000h, reference tag = LBA 8
	[ "$(tail -c 6 "$state/pis-b8" | od -An -tx1 | tr -d ' \n')" = 000000000008 ] || return 1
	# sg_write_x --wrprotect=1 sends the block with its PI: correct tags, GOOD
	sg_write_x --wrprotect=1 --in="$state/pis-b8" --lba=8 --num=1 "$PIS_SD"
}
check pi-scsi-roundtrip pis_roundtrip

pis_bad_guard() {
	local out
	pis_py "$state/pis-b8" "$state/pis-b8g" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[100] ^= 0x10
open(sys.argv[2], 'wb').write(b)
PY
	out=$(pis_write 1 8 520 "$state/pis-b8g")
	pis_refused "$out" "guard check failed" 8 || return 1
	pis_read 0 8 512 "$state/pis-r8" >/dev/null && pis_same "$state/pis-r8" "$state/pis-d8"
}
check pi-scsi-wrong-guard pis_bad_guard

pis_bad_ref() {
	local out
	pis_read 0 9 512 "$state/pis-r9a" >/dev/null || return 1
	out=$(pis_write 1 9 520 "$state/pis-b8") # block 8's tuple at LBA 9
	pis_refused "$out" "reference tag check failed" 9 || return 1
	pis_read 0 9 512 "$state/pis-r9b" >/dev/null && pis_same "$state/pis-r9a" "$state/pis-r9b"
}
check pi-scsi-wrong-reftag pis_bad_ref

# MODE SELECT(10) of a parameter list built by python (8-byte header + page).
pis_mode_select() { # FILE
	local n
	n=$(stat -c %s "$1")
	sg_raw -s "$n" -i "$1" "$PIS_SD" 55 10 00 00 00 00 00 00 "$(printf %02x "$n")" 00 2>&1
}
pis_apptag() {
	local out
	sg_raw -r 20 -o "$state/pis-ctl" "$PIS_SD" 5a 08 0a 00 00 00 00 00 14 00 >/dev/null 2>&1 || return 1
	pis_py "$state/pis-ctl" "$state/pis-sel-ctl" "$state/pis-sel-at" <<'PY'
import sys
c = bytearray(open(sys.argv[1], 'rb').read())
assert c[8 + 5] & 0x80, "ATO is not 1"
c[0:2] = b'\0\0'
c[8] &= 0x7f
c[8 + 5] |= 0x20  # ATMPE
open(sys.argv[2], 'wb').write(c)
# Application Tag mode page: one descriptor, LAST, tag 1234h, LBA 0, 16384 blocks
p = bytearray(8) + bytes([0x4a, 0x02, 0x00, 0x24]) + bytearray(12)
p += bytes([0x80, 0, 0, 0, 0, 0, 0x12, 0x34]) + (0).to_bytes(8, 'big') + (16384).to_bytes(8, 'big')
open(sys.argv[3], 'wb').write(p)
PY
	pis_mode_select "$state/pis-sel-ctl" || return 1
	pis_mode_select "$state/pis-sel-at" || return 1
	sg_modes --page=0x0a,0x02 "$PIS_SD" | tee "$state/pis-modes.txt"
	grep -qi "12 34" "$state/pis-modes.txt" || { echo "sg_modes does not show tag 1234h"; return 1; }
	# block 8 carries application tag 0: refused by the page
	out=$(pis_write 1 8 520 "$state/pis-b8")
	pis_refused "$out" "application tag check failed" 8 || return 1
	pis_py "$state/pis-b8" "$state/pis-b8a" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[514:516] = b'\x12\x34'
open(sys.argv[2], 'wb').write(b)
PY
	pis_write 1 8 520 "$state/pis-b8a" || return 1
	pis_read 0 8 512 "$state/pis-r8" >/dev/null || return 1 # checked against the page: 1234h
	# the page off again: no descriptors, ATMPE 0
	pis_py "$state/pis-sel-ctl" "$state/pis-sel-at" <<'PY'
import sys
c = bytearray(open(sys.argv[1], 'rb').read())
c[8 + 5] &= ~0x20
open(sys.argv[1], 'wb').write(c)
open(sys.argv[2], 'wb').write(bytearray(8) + bytes([0x4a, 0x02, 0x00, 0x0c]) + bytearray(12))
PY
	pis_mode_select "$state/pis-sel-at" && pis_mode_select "$state/pis-sel-ctl"
}
check pi-scsi-apptag-page pis_apptag

# WRITE ATOMIC(16) with WRPROTECT 001b (atomic_write_max set at run time): two
# blocks with their PI land together; with a wrong guard in the second block
# the write is refused (10h/01h, LBA 31) and the first block is unchanged too.
pis_wa16() { # P LBA NLB LEN FILE
	sg_raw -s "$4" -i "$5" "$PIS_SD" 9c $(printf '%02x' $(($1 << 5))) 00 00 00 00 \
		$(printf '%02x %02x %02x %02x' $(($2 >> 24 & 255)) $(($2 >> 16 & 255)) $(($2 >> 8 & 255)) $(($2 & 255))) \
		00 00 00 "$(printf '%02x' "$3")" 00 00 2>&1
}
pis_atomic() {
	local out
	ctl namespace_set name=pis atomic_write_max=64K || return 1
	pis_drain_ua "$PIS_SD"
	head -c 1024 /dev/urandom >"$state/pis-y"
	head -c 1024 /dev/urandom >"$state/pis-x"
	sg_raw -s 1024 -i "$state/pis-y" "$PIS_SD" 8a 00 00 00 00 00 00 00 00 1e 00 00 00 02 00 00 >/dev/null 2>&1 || return 1
	sg_raw -r 1040 -o "$state/pis-ypi" "$PIS_SD" 88 20 00 00 00 00 00 00 00 1e 00 00 00 02 00 00 >/dev/null 2>&1 || return 1
	sg_raw -s 1024 -i "$state/pis-x" "$PIS_SD" 8a 00 00 00 00 00 00 00 00 1e 00 00 00 02 00 00 >/dev/null 2>&1 || return 1
	pis_py "$state/pis-ypi" "$state/pis-ypig" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[520 + 33] ^= 0x04  # the second block's data: its guard is wrong
open(sys.argv[2], 'wb').write(b)
PY
	out=$(pis_wa16 1 30 2 1040 "$state/pis-ypig")
	pis_refused "$out" "guard check failed" 31 || return 1
	pis_read 0 30 512 "$state/pis-r30" >/dev/null || return 1
	head -c 512 "$state/pis-x" | cmp - "$state/pis-r30" || { echo "block 30 changed"; return 1; }
	pis_wa16 1 30 2 1040 "$state/pis-ypi" || return 1
	sg_raw -r 1040 -o "$state/pis-r30pi" "$PIS_SD" 88 20 00 00 00 00 00 00 00 1e 00 00 00 02 00 00 >/dev/null 2>&1 || return 1
	cmp "$state/pis-ypi" "$state/pis-r30pi" || return 1
	# one journal record: header + one range (48 bytes), 2 x 512 data, 2 x 8 metadata
	ctl --json namespace_list >"$state/pis-nl.json" || return 1
	pis_py "$state/pis-nl.json" <<'PY'
import json, sys
def find(o):
    if isinstance(o, dict):
        if o.get("name") == "pis" and "atomic" in o:
            return o
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r:
                return r
a = find(json.load(open(sys.argv[1])))["atomic"]
print("pis atomic:", a)
sys.exit(0 if a["path"] == "journal" and a["journal_bytes"] == 48 + 1040 else 1)
PY
}
check pi-scsi-write-atomic pis_atomic

# Corruption behind the target's back: the guard catches it.
pis_corrupt() {
	local out
	pis_drain_ua "$PIS_SD"
	head -c 512 /dev/urandom >"$state/pis-d100"
	pis_write 0 100 512 "$state/pis-d100" || return 1
	sg_sync "$PIS_SD" || return 1
	pis_py "$state/pis.img" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
b = bytearray(os.pread(fd, 1, 100 * 512 + 7))
b[0] ^= 0x01
os.pwrite(fd, bytes(b), 100 * 512 + 7)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
PY
	rm -f "$state/pis-r100"
	out=$(pis_read 1 100 520 "$state/pis-r100")
	pis_refused "$out" "guard check failed" 100 || return 1
	[ ! -s "$state/pis-r100" ] || { echo "data came back"; return 1; }
	out=$(pis_read 0 100 512 "$state/pis-r100")
	pis_refused "$out" "guard check failed" 100
}
check pi-scsi-corruption pis_corrupt

# READ(32)/WRITE(32) (7Fh, 0009h/000Bh): one block at LBA with xxPROTECT P and EILBRT R.
pis_cdb32() { # SA P LBA R
	printf '7f 00 00 00 00 00 00 18 00 %02x %02x 00 00 00 00 00 %s %s ff ff 00 00 00 00 00 01' "$1" $(($2 << 5)) \
		"$(printf '%08x' "$3" | sed 's/../& /g')" "$(printf '%08x' "$4" | sed 's/../& /g')"
}
# sg_raw takes opcode 7Fh for NVMe over Fabrics unless told it is SCSI.
pis_raw32() { sg_raw --cmdset=1 "$@"; }
pis_type2() {
	local out
	sg_format --format --fmtpinfo=3 --quick --wait "$PIS_SD" || return 1
	pis_drain_ua "$PIS_SD"
	sg_readcap -l "$PIS_SD" | grep "prot_en=1, p_type=1" || return 1
	head -c 512 /dev/urandom >"$state/pis-d20"
	pis_raw32 -s 512 -i "$state/pis-d20" "$PIS_SD" $(pis_cdb32 0x0b 0 20 0x1000) || return 1
	pis_raw32 -r 520 -o "$state/pis-b20" "$PIS_SD" $(pis_cdb32 0x09 1 20 0x1000) || return 1
	[ "$(tail -c 4 "$state/pis-b20" | od -An -tx1 | tr -d ' \n')" = 00001000 ] || return 1
	out=$(pis_raw32 -r 520 -o "$state/pis-b20x" "$PIS_SD" $(pis_cdb32 0x09 1 20 0x1001) 2>&1)
	pis_refused "$out" "reference tag check failed" 20 || return 1
	out=$(pis_read 1 20 520 "$state/pis-b20y")
	echo "$out"
	echo "$out" | grep -qi "invalid command operation code"
}
check pi-scsi-type2 pis_type2
echo "90-pi-scsi took $((SECONDS - pis_t0)) s"
