#!/bin/bash
# tests/limits/acl.sh — iSCSI initiator ACLs and LUN masking against a live
# slated, with a raw initiator (acl_client.py: chosen InitiatorName, REPORT
# LUNS, TEST UNIT READY and INQUIRY to any LUN, SendTargets, a live change
# between two commands of one session) and libiscsi's iscsi-inq -i/iscsi-ls -i:
#  - a target without ACL admits any initiator (the documented default);
#  - with entries, a listed initiator logs in, an unlisted one is refused with
#    Login Status 02/02 (authorization failure);
#  - a LUN-masked initiator's REPORT LUNS lists only its LUNs, TEST UNIT READY
#    to a masked LUN answers 5/25h/00h and INQUIRY peripheral qualifier 3;
#  - SendTargets (discovery, and a normal session naming another target)
#    shows an initiator only the targets it may log in to;
#  - an entry's own CHAP overrides the target's (its secret in, the target's
#    out), mutual too (libiscsi);
#  - a live change of an initiator's LUNs gives its session 6/3Fh/0Eh and the
#    new REPORT LUNS; removing its entry closes its session;
#  - config_save keeps the entries (the CHAP secret only when asked) and a
#    config reload adds and removes entries.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

T1=iqn.2026-12.io.slate:acl1
T2=iqn.2026-12.io.slate:acl2
T3=iqn.2026-12.io.slate:open
I1=iqn.2026-12.io.slate:host1
I2=iqn.2026-12.io.slate:host2
I3=iqn.2026-12.io.slate:stranger
SEC=host2-secret-123
MSEC=acl-target-456
TSEC=target-wide-789
logdir=$SLATE_LOGDIR/limits
mkdir -p "$logdir"
state=$(mktemp -d /tmp/slate-acl.XXXXXX)
trap 'slate_stop >/dev/null 2>&1; rm -rf "$state"' EXIT
log=$logdir/acl-slated.log
: >"$log"
write_cfg() { # ACL_ENTRIES
	cat >"$state/slate.json" <<JSON
{"config": [
  {"method": "namespace_create", "params": {"name": "a0", "backend": "mem", "size": "8M"}},
  {"method": "namespace_create", "params": {"name": "a1", "backend": "mem", "size": "8M"}},
  {"method": "namespace_create", "params": {"name": "a2", "backend": "mem", "size": "8M"}},
  {"method": "iscsi_target_create", "params": {"name": "$T1"}},
  {"method": "iscsi_target_create", "params": {"name": "$T2"}},
  {"method": "iscsi_target_create", "params": {"name": "$T3"}},
  {"method": "iscsi_lun_map", "params": {"target": "$T1", "lun": 0, "namespace": "a0"}},
  {"method": "iscsi_lun_map", "params": {"target": "$T1", "lun": 1, "namespace": "a1"}},
  {"method": "iscsi_lun_map", "params": {"target": "$T1", "lun": 2, "namespace": "a2"}},
  {"method": "iscsi_lun_map", "params": {"target": "$T2", "lun": 0, "namespace": "a0"}},
  {"method": "iscsi_lun_map", "params": {"target": "$T3", "lun": 0, "namespace": "a1"}},
  {"method": "iscsi_target_auth", "params": {"target": "$T2", "chap_user": "tgtwide", "chap_secret": "$TSEC"}},
  $1
  {"method": "iscsi_portal_add", "params": {"addr": "127.0.0.1", "port": 0}}
]}
JSON
}
# T1: host1 sees LUNs 0 and 2, host2 all; T2: host2 only, with its own CHAP (mutual offered).
ACLS="{\"method\": \"iscsi_acl_add\", \"params\": {\"target\": \"$T1\", \"initiator\": \"$I1\", \"luns\": \"0,2\"}},
  {\"method\": \"iscsi_acl_add\", \"params\": {\"target\": \"$T1\", \"initiator\": \"$I2\"}},
  {\"method\": \"iscsi_acl_add\", \"params\": {\"target\": \"$T2\", \"initiator\": \"$I2\", \"chap_user\": \"host2\", \"chap_secret\": \"$SEC\", \"mutual_user\": \"acl2\", \"mutual_secret\": \"$MSEC\"}},"
write_cfg "$ACLS"
if ! slate_start "$state/run" "$state/slate.json" 0 "$log"; then
	slate_result FAIL acl.start "$log" "slated did not start"
	exit 1
fi
P=$SLATE_PORT
ctl() { "$SLATE_BUILD/slatectl" -s "$state/run/slated.sock" "$@"; }
cli() { timeout 30 python3 "$here/acl_client.py" "$P" "$@" 2>&1; }
expect() { # NAME WANT GOT
	if [ "$3" = "$2" ]; then
		slate_result PASS "acl.$1"
	else
		printf 'want:\n%s\ngot:\n%s\n' "$2" "$3" >"$logdir/acl-$1.out"
		slate_result FAIL "acl.$1" "$logdir/acl-$1.out" "unexpected answer"
	fi
}

expect open_target "luns 0" "$(cli "$I3" "$T3" luns)"
expect admitted "luns 0,1,2" "$(cli "$I2" "$T1" luns)"
expect refused "login 2/2" "$(cli "$I3" "$T1" luns)"
expect masked "luns 0,2
tur 0 ok
tur 1 5/25/00
inq 1 pq=3 type=31
inq 2 pq=0 type=0
tur 2 ok" "$(cli "$I1" "$T1" luns tur:0 tur:0 tur:1 inq:1 inq:2 tur:2 tur:2 | grep -v '^tur . 6/29/00' | sed -n '1,6p')"
disco() { cli "$1" discovery st:All | sed 's/^st //' | tr ',' '\n' | sort | paste -sd, -; }
expect discovery_filtered "$T3
$T1,$T3
$T1,$T2,$T3" "$(disco "$I3"; disco "$I1"; disco "$I2")"
# A normal session naming another target: only one the initiator may log in to.
expect normal_sendtargets "st -
st $T3
st $T1" "$(cli "$I1" "$T1" "st:$T2" "st:$T3" st:All)"

# Per-initiator CHAP: host2's own secret on T2; the target-wide one no longer lets it in.
expect own_chap "luns 0" "$(cli "$I2" "$T2" --chap "host2:$SEC" luns)"
expect target_chap_overridden "login 2/1" "$(cli "$I2" "$T2" --chap "tgtwide:$TSEC" luns)"
expect no_chap "login 2/1" "$(cli "$I2" "$T2" luns)"
got=fail
timeout 20 iscsi-inq -i "$I2" "iscsi://host2%$SEC@127.0.0.1:$P/$T2/0?target_user=acl2&target_password=$MSEC" >"$state/inq.out" 2>&1 &&
	grep -q DIRECT_ACCESS "$state/inq.out" && got=ok
timeout 20 iscsi-inq -i "$I2" "iscsi://host2%$SEC@127.0.0.1:$P/$T2/0?target_user=acl2&target_password=wrong-mutual-1" >/dev/null 2>&1 && got=fail
timeout 20 iscsi-inq -i "$I1" "iscsi://host2%$SEC@127.0.0.1:$P/$T2/0" >/dev/null 2>&1 && got=fail
expect own_chap_mutual_libiscsi ok "$got"
got=$(timeout 20 iscsi-ls -s -i "$I1" "iscsi://127.0.0.1:$P" 2>&1 | grep -c -e "$T2" -e "Lun:1")
expect iscsi_ls_filtered 0 "$got"

# Live change: host1's session sees 3Fh/0Eh and the new set; removing the entry closes the session.
out=$(cli "$I1" "$T1" tur:0 tur:0 tur:2 tur:2 luns \
	"run:$SLATE_BUILD/slatectl -s $state/run/slated.sock iscsi_acl_add target=$T1 initiator=$I1 luns:=[1,2]" \
	tur:2 tur:2 luns tur:0 \
	"run:$SLATE_BUILD/slatectl -s $state/run/slated.sock iscsi_acl_remove target=$T1 initiator=$I1" \
	luns)
expect live_change "tur 2 ok
luns 0,2
run
tur 2 6/3f/0e
tur 2 ok
luns 1,2
tur 0 5/25/00
run
connection closed" "$(echo "$out" | tail -n 9)"
expect refused_after_remove "login 2/2" "$(cli "$I1" "$T1" luns)"

# config_save: the entries, the secret only when asked; the list RPC has no secret.
ctl config_save path="$state/run/saved.json" >/dev/null
ctl config_save path="$state/run/saved-secrets.json" include_secrets=true >/dev/null
ctl --json iscsi_acl_list >"$state/list.json"
if grep -q "$SEC" "$state/run/saved.json" "$state/list.json" || ! grep -q "$SEC" "$state/run/saved-secrets.json" ||
	! grep -q "\"initiator\": \"$I2\"" "$state/run/saved.json" || grep -q "$SEC" "$log"; then
	slate_result FAIL acl.config_save "$state/run/saved.json" "secret where not asked for, or an entry missing"
else
	slate_result PASS acl.config_save
fi

# Reload: the file's ACL again (host1 back with LUN 2 only; host2 gone from T1).
write_cfg "{\"method\": \"iscsi_acl_add\", \"params\": {\"target\": \"$T1\", \"initiator\": \"$I1\", \"luns\": [2]}},"
ctl config_reload >"$state/reload.out" 2>&1
expect reload "luns 2
login 2/2
luns 0" "$(cli "$I1" "$T1" luns; cli "$I2" "$T1" luns; cli "$I2" "$T2" --chap "tgtwide:$TSEC" luns)"

if ! slate_alive || ! slate_sanitizer_clean "$log"; then
	slate_result FAIL acl.clean "$log" "slated died or sanitizer report"
fi
