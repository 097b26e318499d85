#!/bin/bash
# tests/lib/ceph-cluster.sh — a throw-away single-node Ceph cluster for tests
# (issue 14), from Debian's packages (ceph-mon, ceph-osd, ceph-common).
#
#   tests/lib/ceph-cluster.sh start DIR [IMAGE SIZE]...   start, print CEPH_CONF=DIR/ceph.conf
#   tests/lib/ceph-cluster.sh stop DIR                    kill the daemons, remove DIR
#   tests/lib/ceph-cluster.sh rss DIR                     resident KiB of the daemons
#
# One monitor and one OSD, both on 127.0.0.1 only, everything (config, mon
# store, OSD, logs, sockets, pid files) under DIR: nothing in /etc/ceph or
# /var/lib/ceph is read or written.  No manager: RBD I/O, pool and image
# creation work without one (it only gathers statistics), and it is the
# largest daemon.  The OSD keeps its objects in memory (memstore): a
# cluster that lives for one test run needs no disk format, starts in a few
# seconds and frees everything when stopped; durability tests kill the
# gateway, not the OSD.  No cephx (auth none, loopback only).  Pool size 1.
# A pool "slate" for RBD, and the images named on the command line
# (`rbd create slate/IMAGE --size SIZE`).
#
# Used by tests/rbd/run.sh and bench/rbd; sourceable for ceph_cluster_start
# and ceph_cluster_stop.
set -u

ceph_cluster_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 30000))
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
	done
	return 1
}

# ceph_cluster_start DIR [IMAGE SIZE]... — 0 when the cluster serves I/O.
ceph_cluster_start() {
	local dir=$1 port fsid t0 i
	shift
	for b in ceph-mon ceph-osd ceph rbd monmaptool; do
		command -v "$b" >/dev/null || { echo "ceph-cluster: $b missing (apt-get install ceph-mon ceph-osd ceph-common)" >&2; return 2; }
	done
	t0=$(date +%s.%N)
	mkdir -p "$dir" || return 1
	dir=$(cd "$dir" && pwd)
	port=$(ceph_cluster_port) || return 1
	fsid=$(uuidgen)
	cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
mon initial members = a
public addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = 8589934592
memstore page set = true
memstore page size = 4096
osd max object name len = 256
osd max object namespace len = 64
run dir = $dir
admin socket = $dir/\$name.asok
pid file = $dir/\$name.pid
log file = $dir/\$name.log
keyring = $dir/keyring
mon data = $dir/\$name
osd data = $dir/\$name
crash dir = $dir/crash
log to stderr = false
err to stderr = false
mon cluster log file = $dir/cluster.log
# Small: a 2-core machine runs the rest of the tests beside it.
osd op num shards = 1
osd op num threads per shard = 2
ms async op threads = 1
osd memory target = 939524096
mon memory target = 268435456
rocksdb cache size = 33554432
debug ms = 0
debug osd = 0
debug mon = 0
EOF
	export CEPH_CONF=$dir/ceph.conf
	ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
		monmaptool --create --addv a "[v2:127.0.0.1:$port]" --fsid "$fsid" "$dir/monmap" >/dev/null &&
		ceph-mon -c "$CEPH_CONF" --mkfs -i a --monmap "$dir/monmap" &&
		ceph-mon -c "$CEPH_CONF" -i a || { echo "ceph-cluster: monitor failed (see $dir/mon.a.log)" >&2; return 1; }
	local id
	id=$(timeout 60 ceph -c "$CEPH_CONF" osd create 2>/dev/null) || { echo "ceph-cluster: osd create failed" >&2; return 1; }
	mkdir -p "$dir/osd.$id"
	ceph-osd -c "$CEPH_CONF" -i "$id" --mkfs --osd-uuid "$(uuidgen)" >/dev/null 2>&1 &&
		ceph-osd -c "$CEPH_CONF" -i "$id" || { echo "ceph-cluster: osd.$id failed (see $dir/osd.$id.log)" >&2; return 1; }
	timeout 60 ceph -c "$CEPH_CONF" osd pool create slate 8 8 >/dev/null 2>&1 &&
		timeout 60 ceph -c "$CEPH_CONF" osd pool application enable slate rbd >/dev/null 2>&1 ||
		{ echo "ceph-cluster: pool creation failed" >&2; return 1; }
	# Up and serving when an image can be created (PGs active).
	while [ $# -ge 2 ]; do
		timeout 60 rbd -c "$CEPH_CONF" create "slate/$1" --size "$2" ||
			{ echo "ceph-cluster: rbd create slate/$1 failed" >&2; return 1; }
		shift 2
	done
	i=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	echo "$i" >"$dir/start-seconds"
	return 0
}

ceph_cluster_pids() {
	cat "$1"/*.pid 2>/dev/null
}

ceph_cluster_rss() {
	local kb=0 p
	for p in $(ceph_cluster_pids "$1"); do
		kb=$((kb + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	echo "$kb"
}

ceph_cluster_stop() {
	local dir=$1 p
	[ -d "$dir" ] || return 0
	for p in $(ceph_cluster_pids "$dir"); do
		kill -9 "$p" 2>/dev/null
	done
	sleep 0.2
	rm -rf "$dir"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	cmd=${1:-}
	[ $# -ge 2 ] || { echo "usage: $0 start|stop|rss DIR [IMAGE SIZE]..." >&2; exit 2; }
	shift
	case $cmd in
	start)
		ceph_cluster_start "$@" || exit 1
		echo "CEPH_CONF=$CEPH_CONF"
		d=$(dirname "$CEPH_CONF")
		echo "started in $(cat "$d/start-seconds") s, $(ceph_cluster_rss "$d") KiB resident" >&2
		;;
	stop) ceph_cluster_stop "$1" ;;
	rss) ceph_cluster_rss "$1" ;;
	*) echo "usage: $0 start|stop|rss DIR [IMAGE SIZE]..." >&2; exit 2 ;;
	esac
fi
