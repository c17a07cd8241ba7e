#!/bin/bash
# Start to serving of the same 2M records (BenchmarkBuildFormats' data,
# blocks/bench_formats_test.go) for spangle from SequenceFiles, spangle
# from sequins' Sparkey input, and stripe/sequins from the same Sparkey
# files, with real hash indexes written by the Sparkey C library: each
# server started on its own, one after another, ROUNDS times; a line
# each: seconds from the process's start to the last key served (GET,
# polled every 50 ms), its peak RSS and the load average. For spangle,
# where those seconds went, from its log: to the build's start (process,
# config, source listing), the build (the "blocks: built" line's), the
# checks and activation (built to "version active"), and active to the
# key served (the poll's granularity); and each round's ratio of
# SequenceFiles' time to Sparkey's.
#
#   cmd/spangle-bench/sparkey-serving.sh SPARKEY SEQUINS [ROUNDS]
#
# SPARKEY is a built spotify/sparkey source tree (see
# blocks/sparkey/testdata/sparkey-c/gen.sh), SEQUINS a sequins binary
# (cmd/spangle-bench/build-sequins.sh). Run from the repository's root.
# SEQUINS "-" leaves sequins out; SPARKEY "-" too, and keeps the index
# files the test writes (their header only: all spangle reads of them).
set -eu
sparkey=-
sequins=-
[ "$1" = - ] || sparkey=$(cd "$1" && pwd)
[ "$2" = - ] || sequins=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
[ "$sparkey" != - ] || [ "$sequins" = - ] || { echo "sequins needs the indexes of the Sparkey C library: give SPARKEY"; exit 2; }
rounds=${3:-3}
tools=blocks/sparkey/testdata/sparkey-c
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/spangle" ./cmd/spangle
go test -count=1 -run TestWriteBenchFormats ./blocks/ -args -formats-out "$work/data" >/dev/null
if [ "$sparkey" != - ]; then
	mkdir -p "$work/inc/sparkey"
	cp "$sparkey/src/sparkey.h" "$work/inc/sparkey/"
	gcc -O2 -o "$work/index" "$tools/index.c" -I"$work/inc" "$sparkey/src/.libs/libsparkey.a" -lsnappy -lzstd
	(cd "$tools" && go build -o "$work/frame" frame.go)
	for f in "$work"/data/sparkey/*.spl; do
		"$work/index" "$f"
		"$work/frame" "${f%.spl}.spi" "${f%.spl}.spi.sz"
		rm "${f%.spl}.spi"
	done
fi
for f in sparkey sequencefile; do
	mkdir -p "$work/src-$f/bench"
	mv "$work/data/$f" "$work/src-$f/bench/1"
	touch "$work/src-$f/bench/1/_SUCCESS"
done
# The last record's key (benchKey(1999999)), escaped as spangle wants it.
key=$(python3 -c '
import urllib.parse
i = 1999999
k = (i * 0x9E3779B97F4A7C15 % 2**64).to_bytes(8, "big") + (i ^ 0xD6E8FEB86659FD93).to_bytes(8, "big")
print(urllib.parse.quote(k, safe=""))')

serve() { # name format
	local run=$work/run port=$((20000 + RANDOM % 20000)) start end code rss
	rm -rf "$run" && mkdir -p "$run"
	case $1 in
	spangle)
		printf '[storage]\ncompression = "s2-blocks"\n' >"$run/conf"
		set -- "$1" "$2" "$work/spangle" serve --config "$run/conf" --source "$work/src-$2" --data-dir "$run/data" \
			--bind 127.0.0.1:$port --nats-listen 127.0.0.1:$((port + 1));;
	sequins)
		printf 'require_success_file = true\n' >"$run/conf"
		set -- "$1" "$2" "$sequins" --config "$run/conf" --source "$work/src-$2" --local-store "$run/store" --bind 127.0.0.1:$port;;
	esac
	start=$(date +%s.%N)
	"${@:3}" >"$run/log" 2>&1 &
	pid=$!
	for ((i = 0; i < 1200; i++)); do
		code=$(curl -sL -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/bench/$key" || true)
		[ "$code" = 200 ] && break
		kill -0 $pid 2>/dev/null || { echo "$1 exited:"; tail -5 "$run/log"; exit 1; }
		sleep 0.05
	done
	end=$(date +%s.%N)
	[ "$code" = 200 ] || { echo "$1 never served the last key"; exit 1; }
	rss=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
	kill $pid && wait $pid || true
	pid=
	took=$(echo "$end - $start" | bc)
	printf '%-8s %-12s %6.2f s  peak RSS %4d MiB  load %s\n' "$1" "$2" "$took" $((rss / 1024)) "$(cut -d' ' -f1-3 /proc/loadavg)"
	[ "$1" = spangle ] || return 0
	# Where it went, from the log's times (milliseconds).
	at() { date -d "$(grep -m1 "$1" "$run/log" | sed 's/^time=\([^ ]*\) .*/\1/')" +%s.%N; }
	local building built active
	building=$(at 'msg="building version"') active=$(at 'msg="version active"')
	built=$(grep -m1 'msg="blocks: built"' "$run/log" | sed 's/.* seconds=\([0-9.e-]*\) .*/\1/')
	printf '         to the build %.2f s, build %.2f s, checks and activation %.2f s, active to served %.2f s\n' \
		"$(echo "$building - $start" | bc)" "$built" "$(echo "$active - $building - $built" | bc)" "$(echo "$end - $active" | bc)"
	eval "took_$2=$took"
}
for ((r = 0; r < rounds; r++)); do
	serve spangle sequencefile
	serve spangle sparkey
	printf 'round %d: SequenceFiles / Sparkey %.2f\n' $((r + 1)) "$(echo "$took_sequencefile / $took_sparkey" | bc -l)"
	[ "$sequins" = - ] || serve sequins sparkey
done
