# tests/e2e/cross.d/88-crypt.sh — sourced by tests/e2e/cross-linux.sh.
# Encryption at rest (src/core/crypt.c) with the Linux kernel as both hosts.
# A thin file namespace "enc" created at runtime with encrypt=true and a key
# file (mode 0600), exported alone as NSID 1 of its own NVMe subsystem
# $CNQN (so the subsystem's Sanitize may crypto-erase: SANICAP.CES is set
# only when every namespace of a subsystem is encrypted) and as LUN 0 of
# its own iSCSI target $CIQN:
#  crypt-setup            both hosts see it; nvme id-ctrl shows SANICAP.CES,
#                         sg_vpd (Block Device Characteristics) WACEREQ 01b
#  crypt-cross-read       1 MiB written by the NVMe host reads back through
#                         the iSCSI host, and the data file does not hold it
#  crypt-nvme-crypto-erase  `nvme sanitize -a 4` (Crypto Erase): the data is
#                         gone on both hosts
#  crypt-scsi-crypto-erase  written again by the iSCSI host, read by the
#                         NVMe host; `sg_sanitize --crypto`: gone on both
# Everything is removed again at the end.

CNQN=nqn.2026-12.io.slate:crypt
CIQN=iqn.2026-12.io.slate:crypt
CRYPT_MARK=SLATE-CRYPT-E2E!
CSD= CNV= CNVCTRL=
crypt_t0=$SECONDS crypt_times=
crypt_lap() { crypt_times="$crypt_times $1 $((SECONDS - crypt_t0))s"; }

crypt_nv_dev() {
	local d n
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$CNQN" ] || continue
		for n in "$d"/nvme*n*; do
			[ "$(cat "$n/nsid" 2>/dev/null)" = 1 ] || continue
			[ -b "/dev/${n##*/}" ] && { echo "/dev/${n##*/}"; return 0; }
		done
	done
	return 1
}
# marks DEV: how many 16-byte marks 1 MiB at the start of DEV holds (read direct)
crypt_marks() {
	dd if="$1" bs=1M count=1 iflag=direct status=none | grep -a -o "$CRYPT_MARK" | wc -l
}
crypt_pattern() { yes "$CRYPT_MARK" | tr -d '\n' | head -c 1048576; } # 1 MiB of marks
crypt_san_done() {
	[ "$(($(nvme sanitize-log "$CNVCTRL" 2>/dev/null | awk '/SSTAT/ {print $NF}') & 7))" = 1 ]
}

crypt_setup() {
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$state/enc.key") || return 1
	ctl namespace_create name=enc backend=file path="$state/enc.img" size=16M \
		encrypt=true key_file="$state/enc.key" || return 1
	ctl --json namespace_list | grep -q '"encrypt": *true' || return 1
	ctl nvmf_subsystem_create nqn="$CNQN" || return 1
	ctl nvmf_subsystem_add_host nqn="$CNQN" host='*' || return 1
	ctl nvmf_ns_attach nqn="$CNQN" nsid=1 namespace=enc || return 1
	ctl iscsi_target_create name="$CIQN" || return 1
	ctl iscsi_lun_map target="$CIQN" lun=0 namespace=enc || return 1
	nvme connect -t tcp -a 127.0.0.1 -s "$PORT" -n "$CNQN" || return 1
	wait_for 10 crypt_nv_dev || return 1
	CNV=$(crypt_nv_dev)
	CNVCTRL=/dev/$(basename "$(grep -l "^$CNQN\$" /sys/class/nvme/nvme*/subsysnqn | head -1 | xargs dirname)")
	CSD=$(iscsi_login "$CIQN" 127.0.0.1 "$ISCSI_PORT") || return 1
	echo "encrypted namespace: NVMe $CNV on $CNVCTRL, iSCSI $CSD"
	local sanicap
	sanicap=$(nvme id-ctrl "$CNVCTRL" | awk '$1 == "sanicap" {print $3}')
	echo "SANICAP $sanicap"
	[ $((sanicap & 1)) = 1 ] || return 1
	sg_vpd -p bdc "$CSD" | tee "$state/crypt-bdc.txt"
	local b7
	b7=$(sg_vpd -p bdc -r "$CSD" | od -An -tu1 -j7 -N1 | tr -d ' ')
	echo "VPD B1h byte 7: $b7 (WACEREQ $(((b7 >> 4) & 3)))"
	[ $(((b7 >> 4) & 3)) = 1 ] || return 1
	sg_opcodes -o 0x48 -s 3 "$CSD" 2>&1 | tee "$state/crypt-rsoc.txt"
	! grep -qi 'not supported' "$state/crypt-rsoc.txt"
}
check crypt-setup crypt_setup
crypt_lap setup

crypt_cross_read() {
	[ -b "$CNV" ] && [ -b "$CSD" ] || return 1
	crypt_pattern >"$state/crypt-pat.bin"
	dd if="$state/crypt-pat.bin" of="$CNV" bs=1M oflag=direct conv=fsync status=none || return 1
	local n
	n=$(crypt_marks "$CSD")
	echo "marks read through iSCSI: $n of 65536"
	[ "$n" = 65536 ] || return 1
	n=$(grep -a -o "$CRYPT_MARK" "$state/enc.img" | wc -l)
	echo "marks in the data file: $n"
	[ "$n" = 0 ]
}
check crypt-cross-read crypt_cross_read
crypt_lap cross-read

crypt_nvme_erase() {
	[ -b "$CNV" ] || return 1
	nvme sanitize "$CNVCTRL" -a 4 >"$state/crypt-san.txt" 2>&1 ||
		nvme sanitize "$CNVCTRL" --sanact=start-crypto-erase >"$state/crypt-san.txt" 2>&1 || {
		cat "$state/crypt-san.txt"
		return 1
	}
	wait_for 30 crypt_san_done || return 1
	nvme sanitize-log "$CNVCTRL" | grep -E 'SSTAT|SCDW10'
	sg_turs "$CSD" >/dev/null 2>&1 # the unit attention, if any
	local a b
	a=$(crypt_marks "$CNV")
	b=$(crypt_marks "$CSD")
	echo "marks after crypto erase: NVMe $a, iSCSI $b"
	[ "$a" = 0 ] && [ "$b" = 0 ]
}
check crypt-nvme-crypto-erase crypt_nvme_erase
crypt_lap nvme-crypto-erase

crypt_scsi_erase() {
	[ -b "$CSD" ] || return 1
	dd if="$state/crypt-pat.bin" of="$CSD" bs=1M oflag=direct conv=fsync status=none || return 1
	local a b
	a=$(crypt_marks "$CNV")
	echo "marks written by iSCSI, read through NVMe (new key): $a"
	[ "$a" = 65536 ] || return 1
	# --early (IMMED), then TEST UNIT READY until it is over: without it
	# sg_sanitize polls at long intervals (76 s of VM time for a 16 MiB LU).
	sg_sanitize --crypto --quick --early "$CSD" || return 1
	wait_for 30 sg_turs "$CSD" || return 1
	a=$(crypt_marks "$CNV")
	b=$(crypt_marks "$CSD")
	echo "marks after SANITIZE CRYPTOGRAPHIC ERASE: NVMe $a, iSCSI $b"
	[ "$a" = 0 ] && [ "$b" = 0 ]
}
check crypt-scsi-crypto-erase crypt_scsi_erase
crypt_lap scsi-crypto-erase

nvme disconnect -n "$CNQN" >/dev/null 2>&1
iscsi_logout "$CIQN" 127.0.0.1 "$ISCSI_PORT" >/dev/null 2>&1
ctl iscsi_target_delete name="$CIQN" >/dev/null 2>&1
ctl nvmf_subsystem_delete nqn="$CNQN" >/dev/null 2>&1
ctl namespace_delete name=enc >/dev/null 2>&1
echo "88-crypt: $((SECONDS - crypt_t0)) s (after:$crypt_times)"
