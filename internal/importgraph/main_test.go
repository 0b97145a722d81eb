package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func layers(t *testing.T) Layers {
	t.Helper()
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ParseLayers(doc)
	if err != nil {
		t.Fatalf("docs/design.md: %v", err)
	}
	return ls
}

// TestNoUpwardImports holds the module to docs/design.md's layer table: no
// package imports one from a higher layer, and every package is in a
// layer. Tests may import anything; only the packages that build are
// bound.
func TestNoUpwardImports(t *testing.T) {
	ls := layers(t)
	pkgs, err := List("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, v := range Violations(ls, pkgs) {
		t.Error(v)
	}
}

func TestLayersOfDesign(t *testing.T) {
	ls := layers(t)
	order := []string{"iwarp/mpa", "blockdev", "transport/lu", "config", "hostdev/remote", "cmd/ddpinitiator"}
	for i := 1; i < len(order); i++ {
		if lo, hi := ls.Of(order[i-1]), ls.Of(order[i]); lo < 0 || lo >= hi {
			t.Errorf("%s is in layer %d, %s in %d: want the first below", order[i-1], lo, order[i], hi)
		}
	}
}

func TestViolations(t *testing.T) {
	ls, err := ParseLayers([]byte("<!-- importgraph:layers -->\n| layer | folders | what |\n| --- | --- | --- |\n" +
		"| 2 | `up/`, `top/sub/` | the top |\n| 1 | `low/` | the bottom |\n<!-- /importgraph:layers -->"))
	if err != nil {
		t.Fatal(err)
	}
	if ls[0].N != 1 || ls[1].Name != "the top" || len(ls[1].Folders) != 2 {
		t.Fatalf("parsed %+v", ls)
	}
	got := Violations(ls, []Package{
		{Path: "low/a", Imports: []string{"low/b"}},
		{Path: "low/c", Imports: []string{"up/x"}},
		{Path: "up/x", Imports: []string{"low/a", "top/sub/y"}},
		{Path: "top/other"},
	})
	want := []string{"low/c (layer 1) imports up/x (layer 2)", "top/other is in no layer of docs/design.md's table"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b bytes.Buffer
	WriteDOT(&b, ls, []Package{{Path: "up/x/deep", Imports: []string{"low/a"}}, {Path: "low/c", Imports: []string{"up/x"}}}, 2)
	dot := b.String()
	for _, s := range []string{`"up/x" -> "low/a";`, `"low/c" -> "up/x" [color=red`, `label="1: the bottom"`} {
		if !strings.Contains(dot, s) {
			t.Errorf("DOT lacks %s:\n%s", s, dot)
		}
	}
	if _, err := ParseLayers([]byte("no table")); err == nil {
		t.Error("a document without the table parses")
	}
}
