#!/bin/sh
# importgraph.sh draws the module's import graph, from go list, to
# docs/imports.svg (or $1): internal/importgraph prints it as DOT in the
# layers of docs/design.md, tred drops the edges a longer path implies,
# and dot lays it out. Needs graphviz; installs it with apt-get if missing.
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/imports.svg}
command -v dot >/dev/null || apt-get install -y graphviz >/dev/null || {
	echo "importgraph.sh: graphviz's dot is missing and apt-get could not install it" >&2
	exit 1
}
dot_file=$(mktemp)
trap 'rm -f "$dot_file"' EXIT
go run ./internal/importgraph >"$dot_file"
# tred exits 1 when it warns about a cycle; go list would have failed first.
tred "$dot_file" | dot -Tsvg -o "$out"
echo "wrote $out" >&2
