#!/bin/sh
# Regenerates the files in this directory with the Sparkey C library
# (github.com/spotify/sparkey, Apache-2.0; built from its source with
# autotools, libsnappy-dev and libzstd-dev; `autoreconf --install &&
# ./configure && make CFLAGS="-O2 -Wno-error"`, as newer gcc warns of its
# MurmurHash3.c): SPARKEY is the built source
# tree. Each version directory holds logs (.spl), their hash indexes
# compressed with framed Snappy (.spi.sz, as sequins takes them; by
# frame.go), and <log>.expected: every put, "<key hex>
# <value hex>", as write.c gave it to the library.
set -eu
: "${SPARKEY:?set SPARKEY to a built spotify/sparkey source tree}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O1 -o "$tmp/write" "$here/write.c" -I"$SPARKEY/src" -I"$tmp/inc" \
	"$SPARKEY/src/.libs/libsparkey.a" -lsnappy -lzstd 2>/dev/null || {
	mkdir -p "$tmp/inc/sparkey" && cp "$SPARKEY/src/sparkey.h" "$tmp/inc/sparkey/"
	gcc -O1 -o "$tmp/write" "$here/write.c" -I"$tmp/inc" "$SPARKEY/src/.libs/libsparkey.a" -lsnappy -lzstd
}
(cd "$here" && go build -o "$tmp/frame" frame.go)
log() { # dir base comp block parts part first count seed
	d="$here/$1"; mkdir -p "$d"
	"$tmp/write" "$d/$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" > "$d/$2.expected"
	"$tmp/frame" "$d/$2.spi" "$d/$2.spi.sz"
	rm "$d/$2.spi"
}
# Snappy blocks of 4 KiB (sequins' default), two partitions, partition 1
# in two logs of disjoint key ranges.
log snappy-4k part-00000 snappy 4096 2 0 0 300 1
log snappy-4k part-00001-00000 snappy 4096 2 1 0 150 2
log snappy-4k part-00001-00001 snappy 4096 2 1 100000 150 3
# Uncompressed, one partition.
log none part-00000 none 0 1 0 0 200 4
# Zstd blocks of 1 KiB, three partitions.
log zstd-1k part-0 zstd 1024 3 0 0 80 5
log zstd-1k part-1 zstd 1024 3 1 0 80 6
log zstd-1k part-2 zstd 1024 3 2 0 80 7
# Snappy blocks of 64 bytes: entries span many blocks.
log snappy-64 part-00000 snappy 64 1 0 0 60 8
