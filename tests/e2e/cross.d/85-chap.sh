# tests/e2e/cross.d/85-chap.sh — sourced by tests/e2e/cross-linux.sh.
# iSCSI CHAP with the Linux initiator (open-iscsi): a target of its own that
# requires CHAP (mutual offered), then for each digest open-iscsi offers
# (node.session.auth.chap_algs MD5, SHA1, SHA256, SHA3-256) a one-way and a
# mutual login that work, a disk that reads; a wrong secret and no CHAP are
# refused; slated's log names the algorithm and never a secret.

CIQN=${XIQN}-chap
CSEC=linux-initiator-secret
CMSEC=slate-target-secret
chap_node() { # NAME VALUE
	iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" -o update -n "$1" -v "$2"
}
chap_setup() {
	ctl namespace_create name=chapns backend=mem size=16M >/dev/null || return 1
	ctl iscsi_target_create name="$CIQN" >/dev/null || return 1
	ctl iscsi_lun_map target="$CIQN" lun=0 namespace=chapns >/dev/null || return 1
	ctl iscsi_target_auth target="$CIQN" chap_user=linux chap_secret="$CSEC" \
		mutual_user=slate mutual_secret="$CMSEC" >/dev/null || return 1
	iscsiadm -m discovery -t sendtargets -p "127.0.0.1:$ISCSI_PORT" >/dev/null || return 1
	iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" >/dev/null
}
chap_try() { # ALG SECRET MUTUAL(0|1) AUTHMETHOD -> 0 when logged in and a block reads
	local dev
	chap_node node.session.auth.authmethod "$4" || return 1
	chap_node node.session.auth.chap_algs "$1" || return 1
	chap_node node.session.auth.username linux || return 1
	chap_node node.session.auth.password "$2" || return 1
	if [ "$3" = 1 ]; then
		chap_node node.session.auth.username_in slate || return 1
		chap_node node.session.auth.password_in "$CMSEC" || return 1
	else
		chap_node node.session.auth.username_in "" 2>/dev/null
		chap_node node.session.auth.password_in "" 2>/dev/null
	fi
	timeout 60 iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" --login >/dev/null 2>&1 || return 1
	wait_for 10 _iscsi_dev_of "$CIQN" >/dev/null || return 1
	dev=$(_iscsi_dev_of "$CIQN")
	dd if="$dev" of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null || return 1
	iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" --logout >/dev/null 2>&1
	wait_for 10 test -z "$(_iscsi_dev_of "$CIQN")"
	return 0
}
chap_expect_alg() { # N MUTUAL: slated logged this algorithm for the last login
	tail -n 40 "$log" | grep -q "authenticated by CHAP (algorithm $1${2:+, mutual})"
}
if check chap-setup chap_setup; then
	for a in MD5:5 SHA1:6 SHA256:7 SHA3-256:8; do
		check "chap-${a%%:*}-one-way" eval 'chap_try "${a%%:*}" "$CSEC" 0 CHAP && chap_expect_alg "${a#*:}" ""'
		check "chap-${a%%:*}-mutual" eval 'chap_try "${a%%:*}" "$CSEC" 1 CHAP && chap_expect_alg "${a#*:}" 1'
	done
	check chap-wrong-secret eval '! chap_try SHA256 not-the-right-secret 0 CHAP'
	check chap-none-refused eval '! chap_try SHA256 "$CSEC" 0 None'
	check chap-no-secret-logged eval '! grep -q -e "$CSEC" -e "$CMSEC" "$log"'
fi
iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" --logout >/dev/null 2>&1
iscsiadm -m node -T "$CIQN" -p "127.0.0.1:$ISCSI_PORT" -o delete >/dev/null 2>&1
ctl iscsi_target_delete name="$CIQN" >/dev/null 2>&1
ctl namespace_delete name=chapns >/dev/null 2>&1
