#!/usr/bin/env bash
# One hub and two regions on this machine, each region serving on its own:
#
#   hub  nats-server (JetStream domain "hub", leafnodes on $HUB_LEAF_PORT):
#        where `spangle publish` puts versions (nats-object://example);
#   eu   one spangle node whose embedded NATS server is the region's
#        (domain "eu") and a leafnode of the hub ([region] hub);
#   us   its own nats-server (domain "us", region.conf) as a leafnode of
#        the hub, and two spangle nodes on it ([nats] url), sharding with
#        replication 1: lookups are proxied inside the region.
#
# It publishes baby-names version 1 at the hub, waits until every node of
# both regions serves it, then version 2, pins version 1 in region us
# only (`spangle activate --region us`), and prints `spangle status
# --regions` and the bytes the hub sent each region (/leafz).
#
#   examples/regions/run.sh            # from anywhere; Ctrl-C or the end stops all
#   KEEP=1 examples/regions/run.sh     # keep serving until Ctrl-C
#
# Environment: PORT_BASE (default 4440: the hub's clients on +0, its
# leafnodes on +1, its monitoring on +2, us's NATS on +3, eu's NATS on
# +4, nodes' HTTP on +11..+13), WORK (default: a new temporary directory,
# removed on exit), DEADLINE_SECS (default 60), BIN (default bin: where
# spangle and nats-server are built), DATA (default
# examples/data/baby-names/1: the version published).
set -euo pipefail

cd "$(dirname "$0")/../.."
PORT_BASE=${PORT_BASE:-4440}
DEADLINE_SECS=${DEADLINE_SECS:-60}
KEEP=${KEEP:-}
BIN=${BIN:-bin}
DATA=${DATA:-examples/data/baby-names/1}
export HUB_PORT=$PORT_BASE HUB_LEAF_PORT=$((PORT_BASE + 1)) HUB_MONITOR=$((PORT_BASE + 2))
export US_PORT=$((PORT_BASE + 3)) EU_PORT=$((PORT_BASE + 4))
# The hub's logins (hub.conf): its administrator, its publisher and an
# operator of every region.
ADMIN="nats://admin:admin-secret@127.0.0.1:$HUB_PORT"
ETL="nats://etl:etl-secret@127.0.0.1:$HUB_PORT"
HUB="nats://ops:ops-secret@127.0.0.1:$HUB_PORT"
if [[ -z "${WORK:-}" ]]; then
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/spangle-regions.XXXXXX")
	REMOVE_WORK=1
else
	mkdir -p "$WORK"
	REMOVE_WORK=
fi
export WORK

pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n "$REMOVE_WORK" ]]; then
		rm -rf "$WORK"
	else
		echo "logs and data kept in $WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building $BIN/spangle and $BIN/nats-server"
go build -trimpath -o "$BIN/spangle" ./cmd/spangle
go build -trimpath -o "$BIN/nats-server" github.com/nats-io/nats-server/v2

# fill replaces $NAME in a config template by the environment's values.
fill() {
	local s
	s=$(<"$1")
	for v in HUB_PORT HUB_LEAF_PORT HUB_MONITOR US_PORT WORK; do
		s=${s//\$$v/${!v}}
	done
	printf '%s\n' "$s" >"$2"
}

# wait_until runs "$@" until it succeeds, or fails after DEADLINE_SECS or
# as soon as a process started here exits.
wait_until() {
	local what=$1
	shift
	local deadline=$((SECONDS + DEADLINE_SECS)) pid
	until "$@" >/dev/null 2>&1; do
		for pid in "${pids[@]}"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "$what: a process (pid $pid) exited; logs in $WORK" >&2
				tail -n 20 "$WORK"/*.log >&2 || true
				exit 1
			fi
		done
		if ((SECONDS > deadline)); then
			echo "$what: not within ${DEADLINE_SECS}s; logs in $WORK" >&2
			tail -n 20 "$WORK"/*.log >&2 || true
			exit 1
		fi
		sleep 0.2
	done
}

fill examples/regions/hub.conf "$WORK/hub.conf"
"$BIN/nats-server" -c "$WORK/hub.conf" >"$WORK/hub.log" 2>&1 &
pids+=($!)
wait_until "hub" curl -fsS "http://127.0.0.1:$HUB_MONITOR/healthz?js-enabled-only=true"
echo "hub: nats://127.0.0.1:$HUB_PORT (leafnodes on 127.0.0.1:$HUB_LEAF_PORT)"

# Publish before the regions start: their mirrors then find the hub's
# buckets at once; then the hub makes the consumers the regions' mirrors
# use (each region's login may reset its own, nothing more).
"$BIN/spangle" publish "$DATA" --to nats-object://example --db baby-names --version 1 \
	--nats "$ETL" --cluster example --quiet
echo "published baby-names 1 at the hub"
"$BIN/spangle" region-consumers --nats "$ADMIN" --cluster example --buckets example eu us

fill examples/regions/region.conf "$WORK/us.conf"
"$BIN/nats-server" -c "$WORK/us.conf" >"$WORK/us-nats.log" 2>&1 &
pids+=($!)
echo "us: nats://127.0.0.1:$US_PORT, a leafnode of the hub"

# node NAME HTTP_PORT CONFIG: starts one spangle node.
node() {
	local name=$1 port=$2
	mkdir -p "$WORK/$name"
	printf '%s\n' "$3" >"$WORK/$name/spangle.toml"
	"$BIN/spangle" serve --config "$WORK/$name/spangle.toml" 2>"$WORK/$name.log" &
	pids+=($!)
	echo "$name: http://127.0.0.1:$port (pid $!, log $WORK/$name.log)"
}
common='source = "nats-object://example"
require_success_file = true'
node eu $((PORT_BASE + 11)) "$common
data_dir = \"$WORK/eu/data\"
bind = \"127.0.0.1:$((PORT_BASE + 11))\"
[nats]
listen = \"127.0.0.1:$EU_PORT\"
server_name = \"eu\"
cluster_name = \"example\"
[region]
name = \"eu\"
hub = \"nats-leaf://eu:eu-secret@127.0.0.1:$HUB_LEAF_PORT\"
hub_consumers = true"
for i in 1 2; do
	node us$i $((PORT_BASE + 11 + i)) "$common
data_dir = \"$WORK/us$i/data\"
bind = \"127.0.0.1:$((PORT_BASE + 11 + i))\"
shard_id = \"$i\"
[nats]
url = \"nats://127.0.0.1:$US_PORT\"
cluster_name = \"example\"
[region]
name = \"us\"
hub_consumers = true
[sharding]
enabled = true
replication = 1
time_to_converge = \"1s\""
done

# serves URL VERSION: the node at URL answers a key from VERSION.
serves() {
	curl -fsS -D - -o /dev/null "$1/baby-names/1880/boy" | grep -qi "^X-Spangle-Version: $2"
}
for port in $((PORT_BASE + 11)) $((PORT_BASE + 12)) $((PORT_BASE + 13)); do
	wait_until "node on $port serving version 1" serves "http://127.0.0.1:$port" 1
done
echo "every node of eu and us serves version 1"

# Version 2 (the same data) at the hub reaches both regions; then us
# alone goes back to 1 (a region pin), eu stays at 2.
rm -rf "$WORK/v2" && cp -r "$DATA" "$WORK/v2"
"$BIN/spangle" publish "$WORK/v2" --to nats-object://example --db baby-names --version 2 \
	--nats "$ETL" --cluster example --quiet
for port in $((PORT_BASE + 11)) $((PORT_BASE + 12)) $((PORT_BASE + 13)); do
	wait_until "node on $port serving version 2" serves "http://127.0.0.1:$port" 2
done
echo "every node serves version 2"
echo "\$ spangle activate --region us --nats $HUB --cluster example baby-names 1"
"$BIN/spangle" activate --region us --nats "$HUB" --cluster example baby-names 1
wait_until "us1 pinned to 1" serves "http://127.0.0.1:$((PORT_BASE + 12))" 1
wait_until "us2 pinned to 1" serves "http://127.0.0.1:$((PORT_BASE + 13))" 1
serves "http://127.0.0.1:$((PORT_BASE + 11))" 2 || { echo "eu left version 2" >&2; exit 1; }
echo
echo "\$ spangle status --regions --nats $HUB --cluster example"
"$BIN/spangle" status --regions --nats "$HUB" --cluster example
echo
echo "bytes the hub sent each region (/leafz):"
curl -fsS "http://127.0.0.1:$HUB_MONITOR/leafz" | grep -oE '"(name|out_bytes)": ?("[^"]*"|[0-9]+)' | paste - -

if [[ -n "$KEEP" ]]; then
	echo
	echo "serving; Ctrl-C stops the hub and both regions"
	wait
fi
