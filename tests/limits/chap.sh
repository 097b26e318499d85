#!/bin/bash
# tests/limits/chap.sh — iSCSI CHAP against a live slated, with libiscsi's
# iscsi-inq as the initiator (CHAP_A 5, MD5: what libiscsi offers; Linux
# open-iscsi's SHA digests are checked in linuxvm) and our own raw logins
# (chap_login.py) for SHA-1, SHA-256 and SHA3-256:
#  - one-way and mutual CHAP log in; a wrong secret, a wrong user, no CHAP
#    on a target that requires it, and a target that answers a mutual
#    challenge with the wrong secret (the initiator refuses) all fail;
#  - discovery sessions require CHAP once iscsi_target_auth sets it without
#    a target;
#  - no secret reaches the log, config_save leaves them out unless
#    include_secrets=true, and a config saved without them is refused on
#    replay (fails closed);
#  - a live reload switches CHAP off and on.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

IQN=iqn.2026-12.io.slate:chap
SEC=alice-secret-123
MSEC=target-secret-456
logdir=$SLATE_LOGDIR/limits
mkdir -p "$logdir"
state=$(mktemp -d /tmp/slate-chap.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/chap-slated.log
: >"$log"
write_cfg() { # AUTH_ENTRIES
	cat >"$state/slate.json" <<JSON
{"options": {"allowed_dirs": ["$state"]}, "config": [
  {"method": "namespace_create", "params": {"name": "c0", "backend": "mem", "size": "16M"}},
  {"method": "iscsi_target_create", "params": {"name": "$IQN"}},
  {"method": "iscsi_lun_map", "params": {"target": "$IQN", "lun": 0, "namespace": "c0"}},
  $1
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
}
write_cfg "{\"method\": \"iscsi_target_auth\", \"params\": {\"target\": \"$IQN\", \"chap_user\": \"alice\", \"chap_secret\": \"$SEC\", \"mutual_user\": \"tgt\", \"mutual_secret\": \"$MSEC\"}},"
if ! slate_start "$state/run" "$state/slate.json" 0 "$log"; then
	slate_result FAIL chap.start "$log" "slated did not start"
	exit 1
fi
P=$SLATE_PORT
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }
inq() { # URL-USERINFO [QUERY] -> 0 when the login (and INQUIRY) worked
	timeout 20 iscsi-inq "iscsi://${1}127.0.0.1:$P/$IQN/0${2:+?$2}" >"$state/inq.out" 2>&1 &&
		grep -q DIRECT_ACCESS "$state/inq.out"
}
check() { # NAME EXPECT(ok|fail) USERINFO [QUERY]
	local got=fail
	inq "$3" "${4:-}" && got=ok
	if [ "$got" = "$2" ]; then
		slate_result PASS "chap.$1"
	else
		slate_result FAIL "chap.$1" "$state/inq.out" "login ${got}ed, expected $2"
		cp "$state/inq.out" "$logdir/chap-$1.out"
	fi
}
check md5_one_way ok "alice%$SEC@"
check md5_mutual ok "alice%$SEC@" "target_user=tgt&target_password=$MSEC"
check wrong_secret fail "alice%not-the-secret-1@"
check wrong_user fail "bob%$SEC@"
check no_chap fail ""
check mutual_wrong_target_secret fail "alice%$SEC@" "target_user=tgt&target_password=not-the-target-9"

# The SHA digests Linux offers, from a raw initiator (libiscsi has MD5 only).
for alg in 6 7 8; do
	if out=$(timeout 20 python3 "$here/chap_login.py" "$P" "$IQN" alice "$SEC" "$alg" tgt "$MSEC" 2>&1); then
		slate_result PASS "chap.alg$alg"
	else
		slate_result FAIL "chap.alg$alg" "$log" "$out"
	fi
done

# Discovery sessions.
dcheck() { # NAME EXPECT USERINFO
	local got=fail
	timeout 20 iscsi-ls "iscsi://${3}127.0.0.1:$P" >"$state/ls.out" 2>&1 && grep -q "$IQN" "$state/ls.out" && got=ok
	if [ "$got" = "$2" ]; then slate_result PASS "chap.$1"; else slate_result FAIL "chap.$1" "$state/ls.out" "discovery ${got}ed, expected $2"; fi
}
dcheck discovery_open ok ""
ctl iscsi_target_auth chap_user=disco chap_secret=discovery-secret-1 >/dev/null
dcheck discovery_required fail ""
dcheck discovery_chap ok "disco%discovery-secret-1@"
ctl iscsi_target_auth >/dev/null

# Secrets: never in the log; config_save without them unless asked; such a config fails closed.
if grep -q -e "$SEC" -e "$MSEC" -e discovery-secret-1 "$log"; then
	slate_result FAIL chap.no_secret_in_log "$log" "a CHAP secret is in the log"
else
	slate_result PASS chap.no_secret_in_log
fi
ctl config_save path="$state/saved.json" >/dev/null
ctl config_save path="$state/saved-secrets.json" include_secrets=true >/dev/null
if grep -q "$SEC" "$state/saved.json" || ! grep -q "$SEC" "$state/saved-secrets.json" ||
	! grep -q '"chap_user": "alice"' "$state/saved.json"; then
	slate_result FAIL chap.config_save "$state/saved.json" "secrets where not asked for, or missing where asked"
else
	# replayed in a throw-away daemon: refused, naming the missing secret
	if timeout 30 "$SLATE_BUILD/slated" --config "$state/saved.json" --state-dir "$state/replay" >"$state/replay.log" 2>&1 ||
		! grep -q "chap_secret" "$state/replay.log"; then
		slate_result FAIL chap.config_save "$state/replay.log" "a config saved without secrets was not refused"
	else
		slate_result PASS chap.config_save
	fi
fi

# Reload: off, then on again.
write_cfg ""
ctl config_reload >"$state/reload1.out" 2>&1
off=fail
inq "" && off=ok
write_cfg "{\"method\": \"iscsi_target_auth\", \"params\": {\"target\": \"$IQN\", \"chap_user\": \"alice\", \"chap_secret\": \"$SEC\"}},"
ctl config_reload >"$state/reload2.out" 2>&1
on=ok
inq "" && on=fail
if [ "$off" = ok ] && [ "$on" = ok ] && inq "alice%$SEC@" && ! grep -q "$SEC" "$state/reload2.out"; then
	slate_result PASS chap.reload
else
	slate_result FAIL chap.reload "$state/reload2.out" "reload: off->open login $off, on->login without CHAP refused $on"
fi
if ! slate_alive || ! slate_sanitizer_clean "$log"; then
	slate_result FAIL chap.clean "$log" "slated died or sanitizer report"
fi
