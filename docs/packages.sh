#!/bin/sh
# Draws the import graph of the module's packages (tests, examples and
# commands' helpers left out) as docs/packages.svg: `make diagram`.
set -eu
mod=github.com/spangledb/spangle
{
	echo 'digraph spangle {'
	echo '  rankdir=TB; node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", fontname="Helvetica", fontsize=11]; edge [color="#777777"];'
	echo '  "spangle (root)" [fillcolor="#dbe9f6"]; "cmd/spangle" [fillcolor="#dbe9f6"];'
	echo '  "edge" [fillcolor="#e3f1df"]; "node" [fillcolor="#fbe9d0"]; "node/cluster" [fillcolor="#fbe9d0"];'
	go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./... |
		grep -v -e '/examples/' -e '/internal/nodetest' -e '/nodetest' -e '/natstest' -e 'cmd/spangle-bench' |
		while read -r pkg imports; do
			from=${pkg#"$mod"}; from=${from#/}; [ -n "$from" ] || from="spangle (root)"
			for imp in $imports; do
				case $imp in
				"$mod") to="spangle (root)" ;;
				"$mod"/*) to=${imp#"$mod"/} ;;
				*) continue ;;
				esac
				case $to in
				*/internal/*|*nodetest|*natstest) continue ;;
				esac
				echo "  \"$from\" -> \"$to\";"
			done
		done
	echo '}'
} | tred | dot -Tsvg -o docs/packages.svg
