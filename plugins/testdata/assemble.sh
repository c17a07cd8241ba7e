#!/bin/sh
# Assembles the hand-written test modules: testdata/X.wat -> testdata/X.wasm.
# Needs wabt's wat2wasm (Debian: apt-get install wabt). Run from plugins/
# (go generate ./plugins does).
set -e
for f in testdata/*.wat; do
	wat2wasm "$f" -o "${f%.wat}.wasm"
done
