# tests/e2e/cross.d/86-acl.sh — sourced by tests/e2e/cross-linux.sh.
# iSCSI initiator ACLs with the Linux initiator (open-iscsi): a target of its
# own with LUNs 0 and 1 and a target-wide CHAP user; an ACL entry for this
# host's InitiatorName (/etc/iscsi/initiatorname.iscsi) that sees LUN 1 only
# and carries its own CHAP user and secret.  Discovery lists the target, the
# login with the entry's CHAP works, the kernel finds LUN 1 alone (the
# session's SCSI devices, sg_luns) and reads it; then the entry is replaced
# by another initiator's: the session is closed, SendTargets hides the
# target and a new login is refused.

acl_t0=$SECONDS
AIQN=${XIQN}-acl
ASEC=linux-acl-secret-1
ME=$(sed -n 's/^InitiatorName=//p' /etc/iscsi/initiatorname.iscsi)
acl_node() { # NAME VALUE
	iscsiadm -m node -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" -o update -n "$1" -v "$2"
}
acl_discovered() { # 0 when SendTargets (a fresh discovery) lists $AIQN
	iscsiadm -m discovery -t sendtargets -p "127.0.0.1:$ISCSI_PORT" 2>/dev/null | grep -q " $AIQN\$"
}
acl_setup() {
	[ -n "$ME" ] || return 1
	ctl namespace_create name=acl0 backend=mem size=16M >/dev/null || return 1
	ctl namespace_create name=acl1 backend=mem size=16M >/dev/null || return 1
	ctl iscsi_target_create name="$AIQN" >/dev/null || return 1
	ctl iscsi_lun_map target="$AIQN" lun=0 namespace=acl0 >/dev/null || return 1
	ctl iscsi_lun_map target="$AIQN" lun=1 namespace=acl1 >/dev/null || return 1
	ctl iscsi_target_auth target="$AIQN" chap_user=targetwide chap_secret=target-wide-secret >/dev/null || return 1
	ctl iscsi_acl_add target="$AIQN" initiator="$ME" luns=1 chap_user=linuxacl chap_secret="$ASEC" >/dev/null || return 1
	acl_discovered || return 1
	acl_node node.session.auth.authmethod CHAP && acl_node node.session.auth.username linuxacl &&
		acl_node node.session.auth.password "$ASEC"
}
acl_luns() { # the LUNs of the session's SCSI devices, comma-separated
	local s d out=
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat "$s/targetname" 2>/dev/null)" = "$AIQN" ] || continue
		for d in "$s"/device/target*/*:*:*:*; do
			[ -e "$d" ] && out=$out${out:+,}${d##*:}
		done
	done
	echo "$out"
}
# refused, and slated says why (its log line may land a moment after the answer)
acl_refused() {
	# the discovery that no longer listed the target deleted its node record:
	# make one by hand, so the login reaches slated (and is refused there)
	iscsiadm -m node -o new -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" >/dev/null 2>&1
	if acl_login; then
		echo "the login succeeded"
		return 1
	fi
	wait_for 10 eval 'tail -n 200 "$log" | grep -q "not in the ACL of target $AIQN"'
}
acl_login() {
	timeout 30 iscsiadm -m node -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" --login >/dev/null 2>&1
}
acl_sees_lun1_only() {
	local dev
	wait_for 10 _iscsi_dev_of "$AIQN" >/dev/null || return 1
	dev=$(_iscsi_dev_of "$AIQN")
	echo "devices at LUNs $(acl_luns); sg_luns:"
	sg_luns -d "$dev" | tee "$state/acl-luns.out"
	[ "$(acl_luns)" = 1 ] && [ "$(grep -c 'lun=' "$state/acl-luns.out")" = 1 ] &&
		grep -q 'lun=1$' "$state/acl-luns.out" &&
		dd if="$dev" of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null
}
acl_session_gone() { ! iscsiadm -m session 2>/dev/null | grep -q " $AIQN "; }
if check acl-setup acl_setup; then
	check acl-login-own-chap acl_login
	check acl-lun-masking acl_sees_lun1_only
	# Another initiator's entry instead of ours: our session is closed, we are hidden and refused.
	ctl iscsi_acl_add target="$AIQN" initiator=iqn.2026-12.io.slate:someone-else >/dev/null
	ctl iscsi_acl_remove target="$AIQN" initiator="$ME" >/dev/null
	check acl-session-closed wait_for 10 eval 'tail -n 20 "$log" | grep -q "no longer in the ACL of $AIQN"'
	iscsiadm -m node -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" --logout >/dev/null 2>&1
	check acl-sendtargets-hides eval '! acl_discovered'
	check acl-login-refused acl_refused
fi
iscsiadm -m node -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" --logout >/dev/null 2>&1
iscsiadm -m node -T "$AIQN" -p "127.0.0.1:$ISCSI_PORT" -o delete >/dev/null 2>&1
ctl iscsi_target_delete name="$AIQN" >/dev/null 2>&1
ctl namespace_delete name=acl0 >/dev/null 2>&1
ctl namespace_delete name=acl1 >/dev/null 2>&1
echo "86-acl: $((SECONDS - acl_t0)) s"
