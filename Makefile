# spangle — make run | make test | make check | make bench
GO        ?= go
BIN       := bin/spangle
BIND      ?= 127.0.0.1:9599
DATA_DIR  ?= .run/data
NATS_LISTEN ?= 127.0.0.1:4222
TEST_FLAGS ?= -race -timeout 25m

.PHONY: all build image run test deps-test deps-cache deps-deploy deps-inputs test-browser check bench bench-go bench-nats bench-e2e bench-scale deps-bench tools examples cluster-example regions-example diagram clean

all: build

# A static binary (CGO_ENABLED=0): it runs on any Linux, and in the
# container image, which has no libc.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(BIN) ./cmd/spangle

# The container image from bin/spangle (examples/deploy/Dockerfile.prebuilt,
# with podman; CONTAINER_ENGINE=docker for docker), tagged $(IMAGE).
# examples/deploy/Dockerfile builds it from source instead.
IMAGE ?= spangle:latest
image: build
	examples/deploy/image.sh $(BIN) $(IMAGE)

# Serve the example source root (the sequins baby-names dataset) on
# $(BIND), its embedded NATS server on $(NATS_LISTEN) (make run
# NATS_LISTEN=127.0.0.1:4223 when 4222 is taken).
run: build
	./$(BIN) serve --config examples/spangle.toml --data-dir $(DATA_DIR) --bind $(BIND) --nats-listen $(NATS_LISTEN)

# The example Wasm plugins, built with the standard Go toolchain.
examples:
	mkdir -p bin/plugins
	for p in murmur3 prefix csv2json; do GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=c-shared -o bin/plugins/$$p.wasm ./examples/plugins/$$p || exit 1; done

# Three nodes on one machine sharing one NATS server: a proxied request and the status.
cluster-example:
	examples/cluster/run.sh

# A hub and two regions (one node with its embedded NATS server; a NATS
# server of its own and two nodes): publish at the hub, a region pin, the
# regions' status and the bytes sent to each.
regions-example:
	examples/regions/run.sh

# The whole suite, with the race detector. Tests that need a program from
# Debian's packages (Chromium for the dashboard, nginx and Varnish for
# the cache test, GoAccess for the access log) skip without them: make
# deps-test installs them (CI does).
test:
	$(GO) test $(TEST_FLAGS) ./...

deps-test: deps-cache deps-deploy deps-inputs
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	@command -v goaccess >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends goaccess) || \
		echo "deps-test: goaccess could not be installed; TestAccessLogGoAccess will skip"
	@command -v h2load >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nghttp2-client) || \
		echo "deps-test: h2load could not be installed; cmd/spangle-bench's TestH2load will skip"

# nginx and Varnish for the end-to-end cache test (TestBehindCaches);
# varnishd compiles its VCL with gcc.
# A failed install (no apt, a package's service that cannot start) only
# makes that test skip.
deps-cache:
	@(command -v nginx && command -v varnishd && command -v gcc) >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx varnish gcc libc6-dev) || \
		echo "deps-cache: nginx or Varnish could not be installed; TestBehindCaches will skip"

# Apache Avro's Python implementation (with its snappy and zstandard
# codecs) writes the Avro files blocks/avroin's conformance tests read. A
# failed install only makes those tests skip.
deps-inputs:
	@/usr/bin/python3 -c 'import avro.datafile, snappy, zstandard' 2>/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-avro python3-snappy python3-zstandard) || \
		echo "deps-inputs: python3-avro could not be installed; the Avro conformance tests will skip"

# The tools of the examples/deploy tests: podman (the image), promtool
# (Debian's prometheus: the alerting rules), systemd-analyze (the unit),
# unshare and ip (the image's entrypoint runs in a network namespace of
# its own). A failed install only makes those tests skip.
deps-deploy:
	@(command -v podman && command -v promtool && command -v systemd-analyze && command -v unshare && command -v ip) >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman prometheus systemd util-linux iproute2) || \
		echo "deps-deploy: podman, promtool or systemd-analyze could not be installed; the examples/deploy tests that need them will skip"

# The dashboard in a real headless Chromium; writes docs/dashboard.png.
test-browser: deps-test
	SPANGLE_UPDATE_SCREENSHOT=1 $(GO) test -count=1 -run TestDashboardBrowser -v ./cmd/spangle

# Drift checks: formatting, vet, staticcheck, go mod tidy, then the tests.
check: tools
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$$($(GO) env GOPATH)/bin/staticcheck ./...
	cp go.mod .go.mod.bak && cp go.sum .go.sum.bak && $(GO) mod tidy && \
	  (diff -q go.mod .go.mod.bak >/dev/null && diff -q go.sum .go.sum.bak >/dev/null) || \
	  (mv .go.mod.bak go.mod; mv .go.sum.bak go.sum; echo "go mod tidy changes go.mod/go.sum"; exit 1)
	rm -f .go.mod.bak .go.sum.bak
	$(MAKE) test

tools:
	@test -x $$($(GO) env GOPATH)/bin/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest

# Benchmarks: the packages' go test -bench figures, then the end-to-end run
# (2,000,000 records, the real binary, wrk at 1 and 50 connections, each
# load paired with a trivial net/http baseline's just before it, median of
# 3 pairs, uniform keys and Zipf (0.99) keys; the baseline with spangle's
# headers; spangle over HTTPS vs the baseline over HTTPS; a 3-node cluster
# with proxied lookups and 20 upgrades under load; spangle publish to NATS
# vs a raw Object Store Put). SCENARIOS=cluster,publish runs only those of the
# end-to-end run (default: all); COMPRESSIONS=none,s2 the value
# compressions the spangle scenario runs with (default
# none,s2,zstd,s2-blocks); SEQUINS=path/to/sequins runs a stripe/sequins
# binary on the same data for the ratios against it.
SCENARIOS ?=
COMPRESSIONS ?=
SEQUINS ?=
bench: bench-go bench-nats bench-e2e

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./blocks/... ./edge ./plugins/... ./examples/plugins/... ./node/...

# NATS lookups (get, part, batch) beside a bare NATS echo responder.
bench-nats:
	$(GO) test -run '^$$' -bench BenchmarkNATS -benchtime 2s ./edge/client

deps-bench:
	@command -v wrk >/dev/null && command -v h2load >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk nghttp2-client)

bench-e2e: build deps-bench
	$(GO) run ./cmd/spangle-bench run --spangle $(BIN) --work .bench/e2e --json .bench/e2e.json $(if $(SCENARIOS),--scenarios $(SCENARIOS)) $(if $(COMPRESSIONS),--compressions $(COMPRESSIONS)) $(if $(SEQUINS),--sequins $(SEQUINS))

# Coordination cost at scale: N spangle nodes (default 10, 25, 50, 100) on a
# three-server NATS cluster run by the harness; KV traffic, CPU and RSS per
# node, publish, kill -9 + healing and NATS-restart convergence, with the
# growth from the smallest N. NODES=10,25 picks the sizes.
NODES ?= 10,25,50,100
bench-scale: build
	$(GO) run ./cmd/spangle-bench scale --spangle $(BIN) --work .bench/scale --nodes $(NODES) --json .bench/scale.json

# diagram draws docs/packages.svg, the package graph in docs/ARCHITECTURE.md
# (needs Graphviz: apt-get install graphviz).
diagram:
	command -v dot >/dev/null || sudo -n apt-get install -y graphviz || apt-get install -y graphviz
	./docs/packages.sh

clean:
	rm -rf bin .run .bench
