package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment: every Go package of the repository (all
// its modules; test-only directories aside) says what it is for in a
// package doc comment, so `go doc` and a newcomer find it there.
func TestEveryPackageHasADocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string][]string{} // directory → its non-test .go files
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 20 {
		t.Fatalf("found only %d packages under %s: the walk is wrong", len(dirs), root)
	}
	var missing []string
	for dir, files := range dirs {
		documented := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			rel, _ := filepath.Rel(root, dir)
			missing = append(missing, rel)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("packages without a doc comment (// Package name … above the package clause of one file, e.g. doc.go):\n%s", strings.Join(missing, "\n"))
	}
}
