#!/bin/sh
# Builds a stripe/sequins binary for `spangle-bench run --sequins` (make
# bench-e2e SEQUINS=…) from a checkout of its repository (its vendor/
# tree holds the C libraries it links: snappy, sparkey, zookeeper).
#
#   cmd/spangle-bench/build-sequins.sh path/to/sequins-checkout out/sequins
#
# Needs gcc, g++, autoconf, automake and libtool (apt-get install autoconf
# automake libtool g++). sequins predates Go modules and its vendored
# golang.org/x/sys reaches into the runtime: it builds in GOPATH mode with
# the linker's linkname check off. The C libraries are built without
# -Werror, which today's compilers trip on.
set -eu
src=$(cd "$1" && pwd)
out=$2
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gopath=$work/gopath
dir=$gopath/src/github.com/stripe/sequins
mkdir -p "$(dirname "$dir")"
cp -R "$src" "$dir"
cd "$dir"
build=$dir/build
make "$build/lib/libsnappy.a"
(cd vendor/sparkey && autoreconf --install && ./configure --prefix="$build" LDFLAGS="-L$build/lib" CPPFLAGS="-I$build/include")
make -C vendor/sparkey CFLAGS='-O2 -Wno-error' install
(cd vendor/zookeeper && autoreconf --install -v -I "$dir/vendor/zookeeper/" && ./configure --prefix="$build")
make -C vendor/zookeeper CFLAGS='-O2 -Wno-error' install
export GO111MODULE=off GOPATH="$gopath" GOTOOLCHAIN=local
go build -o "$build/bin/go-bindata" ./vendor/github.com/jteeuwen/go-bindata/go-bindata/
"$build/bin/go-bindata" -o status.tmpl.go status.tmpl
CGO_CFLAGS="-I$build/include -I$build/include/zookeeper" \
CGO_LDFLAGS="$build/lib/libsparkey.a $build/lib/libsnappy.a $build/lib/libzookeeper_mt.a -lrt -lm -lstdc++" \
	go build -ldflags=-checklinkname=0 -o "$out" .
echo "built $out"
