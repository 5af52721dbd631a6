package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage checks that the table of packages in
// ARCHITECTURE.md matches the tree: every directory with Go files is named
// in it (as `dir/`), and every directory it names exists.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	const root = "../.."
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	inTable := false
	for line := range strings.Lines(string(doc)) {
		switch {
		case strings.HasPrefix(line, "## "):
			inTable = strings.TrimSpace(line) == "## Packages and files"
		case inTable && strings.HasPrefix(line, "| `"):
			first, _, _ := strings.Cut(line[1:], " |")
			for _, m := range regexp.MustCompile("`([a-z0-9_/]+/)`").FindAllStringSubmatch(first, -1) {
				named[strings.TrimSuffix(m[1], "/")] = true
			}
		}
	}
	if len(named) < 10 {
		t.Fatalf("found %d directories in ARCHITECTURE.md's table of packages", len(named))
	}
	var dirs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			dir, _ := filepath.Rel(root, filepath.Dir(p))
			if !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !named[d] {
			t.Errorf("ARCHITECTURE.md's table of packages does not name %s/", d)
		}
	}
	for d := range named {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("ARCHITECTURE.md names %s/, which does not exist", d)
		}
	}
}

// TestInternalIsProductAgnostic: no package under internal/, tests
// included, imports the product's layers (operators, query, crawl, node,
// cluster, cmd): internal/ holds libraries those layers use, never the
// other way round.
func TestInternalIsProductAgnostic(t *testing.T) {
	const root = "../.."
	const module = "github.com/newsflow/newsflow/"
	layers := []string{"operators", "query", "crawl", "node", "cluster", "cmd"}
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			for _, l := range layers {
				if rest == l || strings.HasPrefix(rest, l+"/") {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s imports %s: internal/ may not depend on %s/", rel, p, l)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files under internal/", checked)
	}
}
