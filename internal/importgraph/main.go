// Command importgraph prints the module's import graph as DOT, collapsed to
// folders two levels deep (iwarp/mpa, transport/lu, hostdev/remote, ...)
// and drawn in the layers docs/design.md names, bottom-up. Its test fails
// when a package imports one from a higher layer. scripts/importgraph.sh
// renders the graph to docs/imports.svg.
//
//	go run ./internal/importgraph [-design docs/design.md] > imports.dot
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const module = "github.com/ddpstore/ddpstore"

// A Layer is one row of design.md's layer table: a number (1 at the
// bottom) and the folders it holds.
type Layer struct {
	N       int
	Name    string // the "what it is" column
	Folders []string
}

// Layers are the rows of design.md's layer table.
type Layers []Layer

var folderRE = regexp.MustCompile("`([^`]+)/`")

// ParseLayers reads the table between the markers
// <!-- importgraph:layers --> and <!-- /importgraph:layers -->: rows of
// | N | `folder/`, ... | what it is | ... |.
func ParseLayers(doc []byte) (Layers, error) {
	start := bytes.Index(doc, []byte("<!-- importgraph:layers -->"))
	end := bytes.Index(doc, []byte("<!-- /importgraph:layers -->"))
	if start < 0 || end < start {
		return nil, errors.New("no <!-- importgraph:layers --> table")
	}
	var ls Layers
	sc := bufio.NewScanner(bytes.NewReader(doc[start:end]))
	for sc.Scan() {
		cells := strings.Split(strings.Trim(strings.TrimSpace(sc.Text()), "|"), "|")
		if len(cells) < 3 {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(cells[0]))
		if err != nil {
			continue // the header and its rule
		}
		l := Layer{N: n, Name: strings.TrimSpace(cells[2])}
		for _, m := range folderRE.FindAllStringSubmatch(cells[1], -1) {
			l.Folders = append(l.Folders, m[1])
		}
		if len(l.Folders) == 0 {
			return nil, fmt.Errorf("layer %d names no `folder/`", n)
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return nil, errors.New("the layer table has no rows")
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].N < ls[j].N })
	return ls, nil
}

// Of returns the layer of a package path relative to the module: the one
// whose folder is the longest prefix of it, or -1.
func (ls Layers) Of(rel string) int {
	best, n := -1, 0
	for _, l := range ls {
		for _, f := range l.Folders {
			if (rel == f || strings.HasPrefix(rel, f+"/")) && len(f) > n {
				best, n = l.N, len(f)
			}
		}
	}
	return best
}

// Package is a package of the module and the module's packages it imports,
// as paths relative to the module.
type Package struct {
	Path    string
	Imports []string
}

// List runs go list in dir for the module's packages and their non-test
// imports within the module.
func List(dir string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkg := Package{Path: rel(p.ImportPath)}
		for _, i := range p.Imports {
			if r := rel(i); r != i {
				pkg.Imports = append(pkg.Imports, r)
			}
		}
		pkgs = append(pkgs, pkg)
	}
	return pkgs, nil
}

func rel(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// Violations lists every import of a package from a higher layer, and
// every package that no layer holds.
func Violations(ls Layers, pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		lp := ls.Of(p.Path)
		if lp < 0 {
			out = append(out, fmt.Sprintf("%s is in no layer of docs/design.md's table", p.Path))
			continue
		}
		for _, i := range p.Imports {
			if li := ls.Of(i); li > lp {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", p.Path, lp, i, li))
			}
		}
	}
	return out
}

// collapse cuts a package path to its first depth folders.
func collapse(p string, depth int) string {
	parts := strings.SplitN(p, "/", depth+1)
	return strings.Join(parts[:min(depth, len(parts))], "/")
}

// WriteDOT writes the graph of pkgs collapsed to depth folders, one
// cluster per layer from the bottom of the page up; folders that neither
// import nor are imported are left out.
func WriteDOT(w io.Writer, ls Layers, pkgs []Package, depth int) {
	edges := map[[2]string]bool{}
	nodes := map[string]bool{}
	for _, p := range pkgs {
		from := collapse(p.Path, depth)
		for _, i := range p.Imports {
			to := collapse(i, depth)
			if to != from {
				edges[[2]string{from, to}] = true
				nodes[from], nodes[to] = true, true
			}
		}
	}
	fmt.Fprintln(w, "digraph imports {")
	fmt.Fprintln(w, "\trankdir=TB; newrank=true; ranksep=0.5; node [shape=box, fontname=\"Helvetica\", fontsize=11]; edge [color=\"#555555\", arrowsize=0.6];")
	fmt.Fprintln(w, "\tlabel=\"ddpstore import graph (go list; arrows point at the imported package; higher layers above)\"; fontname=\"Helvetica\"; fontsize=12;")
	byLayer := map[int][]string{}
	for n := range nodes {
		byLayer[ls.Of(n)] = append(byLayer[ls.Of(n)], n)
	}
	for _, l := range append(slices.Clone(ls), Layer{N: -1, Name: "in no layer"}) {
		ns := byLayer[l.N]
		if len(ns) == 0 {
			continue
		}
		sort.Strings(ns)
		fmt.Fprintf(w, "\tsubgraph cluster_%d {\n\t\tlabel=%q; style=rounded; color=\"#999999\";\n", l.N+1, fmt.Sprintf("%d: %s", l.N, l.Name))
		for _, n := range ns {
			fmt.Fprintf(w, "\t\t%q;\n", n)
		}
		fmt.Fprintln(w, "\t}")
	}
	var es [][2]string
	for e := range edges {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i][0]+" "+es[i][1] < es[j][0]+" "+es[j][1] })
	for _, e := range es {
		attr := ""
		if ls.Of(e[1]) > ls.Of(e[0]) {
			attr = " [color=red, penwidth=2]" // upward: the test fails on it
		}
		fmt.Fprintf(w, "\t%q -> %q%s;\n", e[0], e[1], attr)
	}
	fmt.Fprintln(w, "}")
}

func main() {
	design := flag.String("design", "docs/design.md", "the design notes holding the layer table")
	depth := flag.Int("depth", 2, "folders kept of each package path")
	flag.Parse()
	doc, err := os.ReadFile(*design)
	if err == nil {
		var ls Layers
		if ls, err = ParseLayers(doc); err == nil {
			var pkgs []Package
			if pkgs, err = List("."); err == nil {
				WriteDOT(os.Stdout, ls, pkgs, *depth)
				return
			}
		}
	}
	fmt.Fprintf(os.Stderr, "importgraph: %v\n", err)
	os.Exit(1)
}
