# tests/e2e/cross.d/10-state.sh — sourced by tests/e2e/cross-linux.sh.
# The namespace's shared state, changed through one protocol, as the other
# host sees it: the volatile write cache (NVMe Set Features 06h -> SCSI
# caching page WCE, after the MODE PARAMETERS CHANGED unit attention) and
# software write protection (SCSI control page SWP -> NVMe Identify
# Namespace NSATTR and failing NVMe writes, after the Namespace Attribute
# Changed event made the kernel re-read Identify).

sd_wce() { sdparm --quiet --get=WCE "$SD" | awk '{print $2}'; }
sd_swp() { sdparm --quiet --page=co --get=SWP "$SD" | awk '{print $2}'; }
nv_nsattr() { nvme id-ns "$NVDEV" -n 1 -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nsattr"])'; }
nv_ro() { cat "/sys/block/${NVDEV#/dev/}/ro"; }

wce_nvme_to_scsi() {
	nvme set-feature "$NVCTRL" -f 6 -v 0 || return 1
	nvme get-feature "$NVCTRL" -f 6
	# The first command on the iSCSI disk after the change gets MODE
	# PARAMETERS CHANGED (the unit attention the core's event set).
	sg_turs "$SD" >"$state/ua.txt" 2>&1
	cat "$state/ua.txt"
	grep -qi 'mode parameters changed' "$state/ua.txt" || return 1
	local v
	v=$(sd_wce) || v=$(sd_wce)
	echo "iSCSI host sees WCE=$v after NVMe turned the cache off"
	[ "$v" = 0 ] || return 1
	nvme set-feature "$NVCTRL" -f 6 -v 1 || return 1
	sg_turs "$SD" >/dev/null 2>&1
	v=$(sd_wce) || v=$(sd_wce)
	echo "and WCE=$v after it turned it on again"
	[ "$v" = 1 ]
}
check wce-nvme-to-scsi wce_nvme_to_scsi

swp_scsi_to_nvme() {
	sdparm --quiet --set=SWP=1 "$SD" || return 1
	sg_turs "$SD" >/dev/null 2>&1
	echo "SCSI SWP now $(sd_swp)"
	# The Namespace Attribute Changed event makes the kernel re-read Identify.
	wait_for 10 test "$(nv_ro)" = 1 || { echo "NVMe disk not read-only"; return 1; }
	echo "NVMe nsattr $(nv_nsattr), /sys/block ro $(nv_ro)"
	[ "$(nv_nsattr)" = 1 ] || return 1
	# A write straight to the namespace (bypassing the block layer's ro flag).
	if nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero >"$state/wp-write.txt" 2>&1; then
		cat "$state/wp-write.txt"
		echo "NVMe write succeeded on a write-protected namespace"
		return 1
	fi
	cat "$state/wp-write.txt"
	grep -qi 'write.protect\|WRITE_PROTECTED\|0x20' "$state/wp-write.txt" || return 1
	sdparm --quiet --clear=SWP "$SD" || return 1
	wait_for 10 test "$(nv_ro)" = 0 || { echo "NVMe disk still read-only"; return 1; }
	nvme write "$NVDEV" -s 0 -c 0 -z 512 -d /dev/zero
}
check swp-scsi-to-nvme swp_scsi_to_nvme
