package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// repoFile reads a file of the repository (tests run in cmd/herald).
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// serveFlags returns the flags of `herald serve` by name.
func serveFlags(t *testing.T) map[string]*pflag.Flag {
	t.Helper()
	out := map[string]*pflag.Flag{}
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) { out[f.Name] = f })
	return out
}

// docDefault normalizes a default as the docs write it to a flag's
// DefValue spelling: off → false, none → [].
func docDefault(s string) string {
	switch s = strings.Trim(strings.TrimSpace(s), "`"); s {
	case "off":
		return "false"
	case "none":
		return "[]"
	}
	if n, ok := strings.CutSuffix(s, " days"); ok {
		return n + "d"
	}
	return s
}

var (
	// | `--a` / `--b` | `x` / `y` | … (a configuration table row)
	tableRow = regexp.MustCompile("(?m)^\\| (`--[a-z-]+`(?: / `--[a-z-]+`)*) \\| ([^|]+) \\|")
	flagName = regexp.MustCompile("`--([a-z-]+)`")
	// `--flag` (X by default) or `--flag`, X by default, in prose
	byDefault = regexp.MustCompile("`--([a-z-]+)` \\(([^()]+?) by default\\)")
)

// TestDocumentedFlagDefaults (issue 13 point 20): every default the README
// and docs/ state for a `herald serve` flag, in a configuration table or
// as "(X by default)", is the binary's default.
func TestDocumentedFlagDefaults(t *testing.T) {
	flags := serveFlags(t)
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		check := func(name, doc string) {
			f, ok := flags[name]
			if !ok {
				t.Errorf("%s: documents --%s, which herald serve does not have", filepath.Base(file), name)
				return
			}
			doc = strings.TrimSpace(doc)
			if !strings.HasPrefix(doc, "`") && doc != "off" && doc != "none" {
				return // a description (workers/8), not a literal
			}
			checked++
			if got := docDefault(doc); got != f.DefValue && !(doc == "none" && f.DefValue == "") { // "none": an empty list or string
				t.Errorf("%s: --%s documented default %s; the binary's is %q", filepath.Base(file), name, doc, f.DefValue)
			}
		}
		for _, m := range tableRow.FindAllStringSubmatch(text, -1) {
			names := flagName.FindAllStringSubmatch(m[1], -1)
			defs := strings.Split(m[2], " / ")
			if len(names) > 1 && len(defs) != len(names) {
				t.Errorf("%s: row %q: %d flags, %d defaults", filepath.Base(file), m[0], len(names), len(defs))
				continue
			}
			for i, n := range names {
				d := m[2]
				if len(names) > 1 {
					d = defs[i]
				}
				check(n[1], d)
			}
		}
		for _, m := range byDefault.FindAllStringSubmatch(text, -1) {
			check(m[1], "`"+m[2]+"`")
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d documented defaults; the parser is broken", checked)
	}
}

// TestDocsMatchServer (issue 13 points 18 and 20): statements the docs
// made that contradicted the server stay corrected.
func TestDocsMatchServer(t *testing.T) {
	readme, ops, contract, gomod := repoFile(t, "README.md"), repoFile(t, "docs/operations.md"), repoFile(t, "docs/contract.md"), repoFile(t, "go.mod")
	prod := repoFile(t, "docs/production.md")
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)[1]
	for _, c := range []struct {
		doc, name, text string
		want            bool
	}{
		{readme, "README", "Go ≥ " + goVersion, true},
		{readme, "README", "HERALD_SERVER", true},
		{ops, "operations.md", "are\nleft out of the answer when they are 0", false},
		{ops, "operations.md", "is declared but not emitted", false},
		{ops, "operations.md", "Pausing a disabled endpoint loses", false},
		{contract, "contract.md", "data.version", false},
		// A stale node pauses, resumes and enables an endpoint whose values
		// it cannot open (internal/app TestStaleNodeUnreadableEndpoint), as
		// operations.md says; production.md said every other operation
		// answered 409.
		{prod, "production.md", "and other operations on it answer `409`", false},
		{prod, "production.md", "pausing, resuming and enabling it", true},
	} {
		if strings.Contains(c.doc, c.text) != c.want {
			t.Errorf("%s: contains %q = %v; want %v", c.name, c.text, !c.want, c.want)
		}
	}
}

// TestKeyFileIgnoredByGit (issue 13 point 18): the key file Herald creates
// beside the database is in .gitignore, so `git add .` in a checkout that
// ran the README's command does not commit it.
func TestKeyFileIgnoredByGit(t *testing.T) {
	var patterns []string
	for _, line := range strings.Split(repoFile(t, ".gitignore"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	for _, f := range []string{"herald.db", "herald.db.key", "herald.db-wal", "data/herald.db.key"} {
		ignored := false
		for _, p := range patterns {
			if ok, _ := path.Match(p, f); ok {
				ignored = true
			}
			if ok, _ := path.Match(p, path.Base(f)); ok && !strings.Contains(p, "/") {
				ignored = true
			}
		}
		if !ignored {
			t.Errorf("%s is not ignored by .gitignore", f)
		}
	}
}

// docPointer is a pointer of a help text or message to a section of the
// docs: docs/FILE.md, "Heading" (the quoted text a heading, or its start).
var docPointer = regexp.MustCompile(`((?:docs/)?[A-Za-z]+\.md), "([^"]+)"`)

// TestHelpPointsToHeadingsThatExist: every pointer to a section of the
// docs (docs/production.md, "Encryption key rotation") in a command's help
// (short and long texts, flag usages) and in the strings of Herald's
// non-test Go source names a heading of that file: a heading equal to the
// quoted text, or starting with it, case aside. herald rekey --help
// pointed to "Key rotation", a heading docs/production.md does not have
// (it is "Encryption key rotation").
func TestHelpPointsToHeadingsThatExist(t *testing.T) {
	headings := map[string][]string{}
	headingsOf := func(file string) []string {
		if h, ok := headings[file]; ok {
			return h
		}
		var out []string
		for _, l := range strings.Split(repoFile(t, file), "\n") {
			if h, ok := strings.CutPrefix(l, "#"); ok {
				out = append(out, strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#"))))
			}
		}
		headings[file] = out
		return out
	}
	check := func(where, text string) {
		for _, m := range docPointer.FindAllStringSubmatch(text, -1) {
			file := m[1]
			if !strings.Contains(file, "/") {
				file = path.Join("docs", file)
			}
			want := strings.ToLower(m[2])
			found := false
			for _, h := range headingsOf(file) {
				if strings.HasPrefix(h, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s points to %s, %q: no such heading", where, file, m[2])
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check(c.CommandPath()+" (help)", c.Short+"\n"+c.Long+"\n"+c.Example)
		c.Flags().VisitAll(func(f *pflag.Flag) { check(c.CommandPath()+" --"+f.Name, f.Usage) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	// Strings of the source (comments, which wrap headings over lines,
	// left out).
	err := filepath.WalkDir(filepath.Join("..", ".."), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(l, "//"); strings.Contains(code, ".md, ") {
				check(fmt.Sprintf("%s:%d", p, i+1), strings.ReplaceAll(code, `\"`, `"`))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
