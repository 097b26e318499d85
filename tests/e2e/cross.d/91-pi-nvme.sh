# tests/e2e/cross.d/91-pi-nvme.sh — sourced by tests/e2e/cross-linux.sh.
# End-to-end data protection over NVMe/TCP as the Linux host and nvme-cli
# 2.3 see it (src/nvme/pi.c, issue 10), on a namespace of its own (NSID 9,
# 4096-byte blocks, attached at runtime):
#   - `nvme id-ns` lists the LBA formats (MS 0, 8, 16, 16, [16]; MC
#     extended only; DPC types 1-3 first/last) and `nvme nvm-id-ns` their
#     guards (ELBAF: 16b, 16b, 32b with STS 16, [64b]);
#   - `nvme format --lbaf 1 --pi 1 --ms 1`: FLBAS 11h, DPS 1; MSET 0
#     (separate metadata) is Invalid Format (10Ah);
#   - the kernel host with that 8-byte type 1 namespace: its NVMe/TCP
#     carries no metadata, and Linux 6.9+ then gives every metadata format
#     capacity 0 (older kernels used an 8-byte PI format with PRACT): the
#     block device stays with nothing to read, the generic device works;
#   - through the namespace's character device (/dev/ngXnY): `nvme write
#     --prinfo 0xf --ref-tag --app-tag` (PRACT, all checks), a read of the
#     same blocks as extended LBAs (PRACT 0) shows the stored tags; wrong
#     expectations give the right status: application tag 283h, a type 1
#     ILBRT that is not the LBA 181h (Invalid Protection Information), a
#     host-built write with a bad guard 282h and with reference tags that
#     do not follow the LBAs 284h, and such a write stores nothing;
#   - `nvme copy` with --prinfor/--prinfow: the metadata moves, type 1
#     reference tags become the destination LBAs, each check's status;
#   - corruption behind the target's back (bits flipped in the backing
#     file): a checked read is 282h (Guard Check Error), not the bad data,
#     while an unchecked read (PRCHK 0) returns the flipped data;
#   - a 16-byte metadata format (type 3, PI first; capacity 0 for the
#     kernel too): nvme-cli reads and writes it as extended LBAs with PRACT
#     (the metadata is more than the PI, so it is transferred).
# Cost: about 55 s of VM time (emulated; the copy checks about 6 s of it), most of it
# nvme-cli starting up.

PINS=9
pn_dev() {
	local n
	for n in /sys/class/nvme/"${NVCTRL#/dev/}"/nvme*n* /sys/class/nvme-subsystem/nvme-subsys*/nvme*n*; do
		[ "$(cat "$n/nsid" 2>/dev/null)" = "$PINS" ] && [ -b "/dev/${n##*/}" ] &&
			{ echo "/dev/${n##*/}"; return 0; }
	done
	return 1
}
pn_sectors() { cat "/sys/block/$(basename "$PNDEV")/size"; }
pn_idns() { # pn_idns PYEXPR -> from nvme id-ns JSON (d)
	nvme id-ns "$NVCTRL" -n $PINS -o json | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}
pn_be() { echo $((16#$(od -An -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n'))); } # FILE OFF LEN
pn_u16be() { pn_be "$1" "$2" 2; }
pn_u32be() { pn_be "$1" "$2" 4; }
pn_flip() { # FILE OFF: xor bit 4 of that byte in place
	local b
	b=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
	printf "\\x$(printf %02x $((b ^ 0x10)))" | dd of="$1" bs=1 seek="$2" count=1 conv=notrunc,fsync 2>/dev/null
}
# pn_status SCTSC CMD... -> runs CMD, prints its output; succeeds if it failed with
# that NVMe status (SCT and SC, e.g. 0x282: nvme-cli's "(0x4282)" less DNR/More/CRD)
pn_status() {
	local want=$1 out got
	shift
	out=$("$@" 2>&1) && { echo "$out"; echo "succeeded, expected status $want"; return 1; }
	echo "$out"
	got=$(echo "$out" | sed -n 's/.*NVMe status: .*(\(0x[0-9a-fA-F]*\)).*/\1/p' | tail -1)
	[ -n "$got" ] && [ $((got & 0x7ff)) = $((want)) ]
}

pn_setup() {
	ctl namespace_create name=pinv backend=file path="$state/pinv.img" size=16M block_size=4096 || return 1
	ctl nvmf_ns_attach nqn="$XNQN" namespace=pinv nsid=$PINS || return 1
	nvme ns-rescan "$NVCTRL" # not waiting for the Namespace Attribute Changed notice
	wait_for 20 pn_dev || return 1
	PNDEV=$(pn_dev)
	PNC=/dev/ng${PNDEV#/dev/nvme}
	echo "PI namespace: $PNDEV (generic $PNC)"
	test -c "$PNC"
}
PNDEV= PNC=
check nvme-pi-namespace pn_setup

pn_formats() {
	local v
	v=$(pn_idns '"%d %d %d %d %s" % (d["nlbaf"], d["mc"], d["dpc"], d["flbas"], ",".join(str(l["ms"]) for l in d["lbafs"][:d["nlbaf"]+1]))')
	echo "nlbaf mc dpc flbas ms: $v"
	case $v in "3 1 31 0 0,8,16,16" | "4 1 31 0 0,8,16,16,16") ;; *) return 1 ;; esac
	# ELBAF 3: 32b guard (PIF 1), 16-bit storage tag
	nvme nvm-id-ns "$NVCTRL" -n $PINS -o json | python3 -c "import json,sys
d = json.load(sys.stdin); e = d['elbafs']
print(e[:4])
sys.exit(not (e[1]['pif'] == 0 and e[3]['pif'] == 1 and e[3]['sts'] == 16))"
}
check nvme-pi-id-ns-formats pn_formats

pn_format1() {
	pn_status 0x10a nvme format "$NVCTRL" -n $PINS --lbaf=1 --pi=1 --ms=0 --force || return 1
	nvme format "$NVCTRL" -n $PINS --lbaf=1 --pi=1 --pil=0 --ms=1 --force || return 1
	local v
	v=$(pn_idns '"%d %d" % (d["flbas"], d["dps"])')
	echo "flbas dps: $v"
	[ "$v" = "17 1" ]
}
check nvme-pi-format-type1 pn_format1

# The kernel's view: its NVMe/TCP transport does not carry metadata
# (NVME_F_METADATA_SUPPORTED is RDMA's and FC's), and since Linux 6.9 it
# then does not even look at the PI type: every format with metadata gets
# capacity 0, the 8-byte PI one too (older kernels used it with PRACT).
# The block device stays, unusable; the generic device /dev/ngXnY works.
pn_kernel() {
	wait_for 10 test "$(pn_sectors)" = 0 || return 1
	echo "kernel $(uname -r): $PNDEV $(pn_sectors) sectors with 8-byte type 1 PI;" \
		"integrity: $(cat /sys/block/$(basename "$PNDEV")/integrity/format 2>/dev/null || echo none)"
	local n
	n=$(dd if="$PNDEV" bs=4096 count=1 iflag=direct 2>/dev/null | wc -c)
	echo "a block-device read returns $n bytes"
	[ "$n" = 0 ]
}
check nvme-pi-kernel-capacity-0 pn_kernel

pn_tags() {
	local f=$state/pn-ext.bin
	head -c 8192 /dev/urandom >"$state/pn-d.bin"
	# PRACT with every check: the controller generates guard, LBAT and the reference tag
	nvme write "$PNC" -s 16 -c 1 -z 8192 -d "$state/pn-d.bin" --prinfo=0xf --ref-tag=16 \
		--app-tag=0x1234 --app-tag-mask=0xffff || return 1
	# the same blocks as extended LBAs (4104 bytes each) with every check, the tags stored
	nvme read "$PNC" -s 16 -c 1 -z 8208 -d "$f" --prinfo=0x7 --ref-tag=16 --app-tag=0x1234 \
		--app-tag-mask=0xffff || return 1
	echo "block 16: app $(pn_u16be "$f" 4098) ref $(pn_u32be "$f" 4100); block 17: app $(pn_u16be "$f" 8202) ref $(pn_u32be "$f" 8204)"
	[ "$(pn_u16be "$f" 4098)" = 4660 ] && [ "$(pn_u32be "$f" 4100)" = 16 ] && [ "$(pn_u32be "$f" 8204)" = 17 ] || return 1
	cmp <(head -c 4096 "$f") <(head -c 4096 "$state/pn-d.bin") || return 1
	# PRACT read with checks: data only
	nvme read "$PNC" -s 16 -c 1 -z 8192 -d "$state/pn-d2.bin" --prinfo=0xf --ref-tag=16 \
		--app-tag=0x1234 --app-tag-mask=0xffff || return 1
	cmp "$state/pn-d.bin" "$state/pn-d2.bin"
}
check nvme-pi-prinfo-tags pn_tags

pn_wrong() {
	local f=$state/pn-ext.bin bad=$state/pn-bad.bin
	# wrong application tag: End-to-end Application Tag Check Error (2h/83h)
	pn_status 0x283 nvme read "$PNC" -s 16 -c 1 -z 8192 -d /dev/null \
		--prinfo=0xa --ref-tag=16 --app-tag=0x4321 --app-tag-mask=0xffff || return 1
	# a type 1 ILBRT that is not the LBA: Invalid Protection Information (1h/81h)
	pn_status 0x181 nvme read "$PNC" -s 16 -c 0 -z 4096 -d /dev/null \
		--prinfo=0x9 --ref-tag=99 || return 1
	# host-built extended LBAs (valid PI for LBAs 16-17) written to LBA 20: the reference
	# tags do not follow (2h/84h); with a data bit flipped, the guard fails (2h/82h)
	pn_status 0x284 nvme write "$PNC" -s 20 -c 1 -z 8208 -d "$f" --prinfo=0x1 --ref-tag=20 || return 1
	cp "$f" "$bad" && pn_flip "$bad" 100
	pn_status 0x282 nvme write "$PNC" -s 16 -c 1 -z 8208 -d "$bad" --prinfo=0x4 || return 1
	# nothing was stored: LBA 20 still unwritten (zeroes; the escape passes the checks)
	nvme read "$PNC" -s 20 -c 1 -z 8192 -d "$state/pn-z.bin" --prinfo=0xc || return 1
	cmp "$state/pn-z.bin" <(head -c 8192 /dev/zero)
}
check nvme-pi-wrong-tags-statuses pn_wrong

# NVMe Copy with PI (core/copy.c): the blocks' metadata moves with them, a type 1
# reference tag becomes the destination LBA's; PRINFOR checks the sources against
# the entry's ELBT/ELBAT/ELBATM, PRINFOW the destination against ILBRT/LBAT/LBATM
# or (PRACT) makes new PI.
pn_copy() {
	nvme copy "$PNC" -n $PINS --sdlba=40 --slbs=16 --blocks=1 --prinfor=0x7 \
		--expected-ref-tags=16 --expected-app-tags=0x1234 --expected-app-tag-masks=0xffff \
		--prinfow=0x7 --ref-tag=40 --app-tag=0x1234 --app-tag-mask=0xffff || return 1
	nvme read "$PNC" -s 40 -c 1 -z 8208 -d "$state/pn-cp.bin" --prinfo=0x7 --ref-tag=40 \
		--app-tag=0x1234 --app-tag-mask=0xffff || return 1
	echo "copied to 40: app $(pn_u16be "$state/pn-cp.bin" 4098) ref $(pn_u32be "$state/pn-cp.bin" 4100), $(pn_u32be "$state/pn-cp.bin" 8204)"
	[ "$(pn_u16be "$state/pn-cp.bin" 4098)" = 4660 ] && [ "$(pn_u32be "$state/pn-cp.bin" 4100)" = 40 ] &&
		[ "$(pn_u32be "$state/pn-cp.bin" 8204)" = 41 ] || return 1
	cmp <(head -c 4096 "$state/pn-cp.bin") <(head -c 4096 "$state/pn-d.bin") || return 1
	# a source application tag that is not ELBAT: 2h/83h; an ELBT that is not the
	# type 1 source LBA: 1h/81h (Invalid Protection Information)
	pn_status 0x283 nvme copy "$PNC" -n $PINS --sdlba=50 --slbs=16 --blocks=1 --prinfor=0x2 \
		--expected-app-tags=0x4321 --expected-app-tag-masks=0xffff || return 1
	pn_status 0x181 nvme copy "$PNC" -n $PINS --sdlba=50 --slbs=16 --blocks=1 --prinfor=0x1 \
		--expected-ref-tags=99 || return 1
	# nothing reached LBA 50 (still the escape: zeroes, every check passes)
	nvme read "$PNC" -s 50 -c 1 -z 8192 -d "$state/pn-z.bin" --prinfo=0xf --ref-tag=50 || return 1
	cmp "$state/pn-z.bin" <(head -c 8192 /dev/zero) || return 1
	# PRINFOW PRACT: the destination's PI made anew with LBAT 77h
	nvme copy "$PNC" -n $PINS --sdlba=60 --slbs=16 --blocks=1 --prinfow=0x8 --ref-tag=60 \
		--app-tag=0x77 || return 1
	nvme read "$PNC" -s 60 -c 1 -z 8192 -d "$state/pn-cp2.bin" --prinfo=0xf --ref-tag=60 \
		--app-tag=0x77 --app-tag-mask=0xffff || return 1
	cmp "$state/pn-cp2.bin" "$state/pn-d.bin"
}
check nvme-pi-copy-prinfor-prinfow pn_copy

# Flip a bit of LBA 16's data in the backing file behind slated's back.
pn_corrupt() {
	pn_flip "$state/pinv.img" $((16 * 4096 + 777)) || return 1
	pn_status 0x282 nvme read "$PNC" -s 16 -c 0 -z 4096 -d "$state/pn-c.bin" --prinfo=0xc || return 1
	# nothing of the bad block reached the host
	! cmp -s <(head -c 4096 "$state/pn-c.bin" 2>/dev/null) <(head -c 4096 "$state/pn-d.bin") || return 1
	# an unchecked read (PRCHK 0) returns what is stored
	nvme read "$PNC" -s 16 -c 0 -z 4096 -d "$state/pn-c.bin" --prinfo=0x8 || return 1
	! cmp -s "$state/pn-c.bin" <(head -c 4096 "$state/pn-d.bin")
}
check nvme-pi-corruption-guard-error pn_corrupt

pn_format16() {
	nvme format "$NVCTRL" -n $PINS --lbaf=2 --pi=3 --pil=1 --ms=1 --force || return 1
	local v
	v=$(pn_idns '"%d %d" % (d["flbas"], d["dps"])')
	echo "flbas dps: $v"
	[ "$v" = "18 11" ] || return 1
	wait_for 10 test "$(pn_sectors)" = 0 || return 1
	echo "kernel: $(pn_sectors) sectors (16-byte metadata it cannot transfer over TCP)"
	# PRACT with metadata larger than the PI: extended LBAs of 4112 bytes
	head -c 4112 /dev/urandom >"$state/pn-16.bin"
	nvme write "$PNC" -s 3 -c 0 -z 4112 -d "$state/pn-16.bin" --prinfo=0x8 --app-tag=0x77 || return 1
	nvme read "$PNC" -s 3 -c 0 -z 4112 -d "$state/pn-16r.bin" --prinfo=0xc --app-tag=0x77 --app-tag-mask=0xffff || return 1
	echo "PI first: app $(pn_u16be "$state/pn-16r.bin" 4098)"
	[ "$(pn_u16be "$state/pn-16r.bin" 4098)" = 119 ] && cmp <(head -c 4096 "$state/pn-16.bin") <(head -c 4096 "$state/pn-16r.bin")
}
check nvme-pi-format-16b-metadata pn_format16

pn_gone() { ! pn_dev >/dev/null; }
pn_teardown() {
	ctl nvmf_ns_detach nqn="$XNQN" nsid=$PINS || return 1
	nvme ns-rescan "$NVCTRL"
	wait_for 20 pn_gone || return 1
	ctl namespace_delete name=pinv
}
check nvme-pi-namespace-gone pn_teardown
