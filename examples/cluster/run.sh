#!/usr/bin/env bash
# Three spangle nodes on this machine and their NATS cluster: each node
# embeds one NATS server (clients on 127.0.0.1:$NATS_PORT+i, routes on
# $ROUTE_BASE+i), the three form one JetStream cluster and the buckets have
# 3 replicas, so any one node can go away without the others losing NATS.
# Each node has its own data dir and HTTP port and serves examples/data with
# [sharding] enabled, replication 2, shard IDs 1..3.
#
#   examples/cluster/run.sh            # from anywhere; Ctrl-C or the end stops all
#   KEEP=1 examples/cluster/run.sh     # keep serving until Ctrl-C
#
# Environment: NATS_PORT (default 4330: clients on 4331..4333), ROUTE_BASE
# (default 6330: routes on 6331..6333), HTTP_BASE (default 9600: nodes on
# 9601..9603), WORK (default: a new temporary directory, removed on exit),
# BIN (default bin: where spangle is built).
set -euo pipefail

cd "$(dirname "$0")/../.."
NATS_PORT=${NATS_PORT:-4330}
ROUTE_BASE=${ROUTE_BASE:-6330}
HTTP_BASE=${HTTP_BASE:-9600}
DEADLINE_SECS=${DEADLINE_SECS:-60}
KEEP=${KEEP:-}
BIN=${BIN:-bin}
if [[ -z "${WORK:-}" ]]; then
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/spangle-cluster.XXXXXX")
	REMOVE_WORK=1
else
	mkdir -p "$WORK"
	REMOVE_WORK=
fi

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

echo "building $BIN/spangle"
go build -trimpath -o "$BIN/spangle" ./cmd/spangle

for i in 1 2 3; do
	dir="$WORK/node$i"
	mkdir -p "$dir"
	routes="\"nats://127.0.0.1:$((ROUTE_BASE + 1))\", \"nats://127.0.0.1:$((ROUTE_BASE + 2))\", \"nats://127.0.0.1:$((ROUTE_BASE + 3))\""
	nats="listen = \"127.0.0.1:$((NATS_PORT + i))\"
server_name = \"n$i\"
embedded_cluster = \"example-nats\"
embedded_cluster_listen = \"127.0.0.1:$((ROUTE_BASE + i))\"
embedded_routes = [$routes]
replicas = 3"
	cat >"$dir/spangle.toml" <<TOML
source = "examples/data"
data_dir = "$dir/data"
bind = "127.0.0.1:$((HTTP_BASE + i))"
require_success_file = true
shard_id = "$i"

[nats]
$nats
cluster_name = "example"

[sharding]
enabled = true
replication = 2
time_to_converge = "2s"

[dbs.baby-names]
content_type = "text/plain; charset=utf-8"
TOML
	"$BIN/spangle" serve --config "$dir/spangle.toml" 2>"$dir/log" &
	pids+=($!)
	echo "node $i: http://127.0.0.1:$((HTTP_BASE + i)) (pid $!, log $dir/log)"
done

# Wait until every node is ready, with a deadline.
deadline=$((SECONDS + DEADLINE_SECS))
for i in 1 2 3; do
	url="http://127.0.0.1:$((HTTP_BASE + i))/readyz"
	until curl -fsS -o /dev/null "$url" 2>/dev/null; do
		if ((SECONDS > deadline)); then
			echo "node $i not ready within ${DEADLINE_SECS}s; its log:" >&2
			tail -n 30 "$WORK/node$i/log" >&2
			exit 1
		fi
		if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
			echo "node $i exited; its log:" >&2
			tail -n 30 "$WORK/node$i/log" >&2
			exit 1
		fi
		sleep 0.2
	done
	echo "node $i ready"
done

# A proxied request: with replication 2 over 3 nodes each node holds about
# two thirds of the partitions. Try keys on each node until one is answered
# by a peer (X-Spangle-Proxied-To).
found=
until [[ -n "$found" ]]; do
	for i in 1 2 3; do
		node="http://127.0.0.1:$((HTTP_BASE + i))"
		for year in $(seq 1880 1900); do
			for who in boy girl; do
				headers=$(curl -fsS -o /dev/null -D - "$node/baby-names/$year/$who" 2>/dev/null || true)
				if grep -qi '^X-Spangle-Proxied-To:' <<<"$headers"; then
					found="$node/baby-names/$year/$who"
					break 3
				fi
			done
		done
	done
	if [[ -z "$found" ]]; then
		if ((SECONDS > deadline)); then
			echo "no key was proxied within ${DEADLINE_SECS}s: some node holds every partition" >&2
			"$BIN/spangle" status --nats "nats://127.0.0.1:$((NATS_PORT + 1))" --cluster example >&2 || true
			exit 1
		fi
		sleep 0.5 # the cluster may still be converging
	fi
done
echo
echo "\$ curl -i $found"
curl -sS -i "$found"
echo
echo
echo "\$ spangle status --nats nats://127.0.0.1:$((NATS_PORT + 1)) --cluster example"
"$BIN/spangle" status --nats "nats://127.0.0.1:$((NATS_PORT + 1))" --cluster example

if [[ -n "$KEEP" ]]; then
	echo
	echo "serving; Ctrl-C stops the three nodes"
	wait
fi
