// Package doccheck holds the tests that keep the docs true to the code:
// every relative link in README.md and docs/ resolves, every test a page
// cites exists, and docs/lock-flow.md names functions where they are.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// pages returns README.md and every page under docs/, as paths from root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range docs {
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
	}
	for _, dir := range []string{"examples", "benchmarks", "otel", "cmd"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "README.md" {
				rel, _ := filepath.Rel(root, p)
				out = append(out, rel)
			}
			return nil
		})
	}
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fenced drops fenced code blocks, whose brackets are Go, not links.
func fenced(s string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinksResolve: a link to a file of the repository names a
// file that is there, and a link to a heading names one the page has.
func TestRelativeLinksResolve(t *testing.T) {
	n := 0
	for _, page := range pages(t) {
		text := fenced(read(t, page))
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s: link %q: no such file %s", page, target, path)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !hasAnchor(read(t, path), anchor) {
				t.Errorf("%s: link %q: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d relative links found: the pattern no longer finds them", n)
	}
	t.Logf("%d relative links checked", n)
}

// hasAnchor reports whether markdown text has a heading whose GitHub
// anchor is anchor.
func hasAnchor(text, anchor string) bool {
	for line := range strings.SplitSeq(fenced(text), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok && slug(strings.TrimLeft(h, "#")) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var testNameRE = regexp.MustCompile(`\b(Test[A-Z][A-Za-z0-9_]*|Benchmark[A-Z][A-Za-z0-9_]*|Example[A-Z][A-Za-z0-9_]*)\b`)

// TestCitedTestsExist: a test, benchmark or example a page names is a
// function of some _test.go file in the repository, or begins the names
// of some (a -run pattern), so a renamed test cannot leave a page citing
// nothing.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	declRE := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range declRE.FindAllStringSubmatch(string(b), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := map[string][]string{}
	for _, page := range pages(t) {
		for _, name := range testNameRE.FindAllString(read(t, page), -1) {
			cited[name] = append(cited[name], page)
		}
	}
	var names []string
	for name := range cited {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !defined[name] && !prefixOfOne(defined, name) {
			t.Errorf("%s cite %s, which no _test.go defines", strings.Join(dedup(cited[name]), ", "), name)
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d cited names found: the pattern no longer finds them", len(names))
	}
	t.Logf("%d cited test names checked", len(names))
}

// prefixOfOne reports whether name begins some defined name: a -run
// pattern such as TestReplicaSync picks every test it begins.
func prefixOfOne(defined map[string]bool, name string) bool {
	for d := range defined {
		if strings.HasPrefix(d, name) {
			return true
		}
	}
	return false
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

var flowRowRE = regexp.MustCompile("(?m)^\\| \\d+ \\| ([^ |]+\\.go) \\| `([^`]+)` \\|")

// TestLockFlowNamesLiveCode: every row of docs/lock-flow.md names a
// function (Type.Method or Func) declared in the file it names.
func TestLockFlowNamesLiveCode(t *testing.T) {
	rows := flowRowRE.FindAllStringSubmatch(read(t, "docs/lock-flow.md"), -1)
	if len(rows) < 20 {
		t.Fatalf("only %d rows found in docs/lock-flow.md", len(rows))
	}
	for _, row := range rows {
		file, name := row[1], row[2]
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("docs/lock-flow.md names %s: %v", file, err)
			continue
		}
		if !declares(f, name) {
			t.Errorf("docs/lock-flow.md names %s in %s, which does not declare it", name, file)
		}
	}
}

// declares reports whether f declares name: "Func", or "Type.Method" for
// a method on Type or *Type (a generic receiver's parameters ignored).
func declares(f *ast.File, name string) bool {
	recv, fn, isMethod := strings.Cut(name, ".")
	if !isMethod {
		fn, recv = recv, ""
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn {
			continue
		}
		if recv == "" && fd.Recv == nil {
			return true
		}
		if recv != "" && fd.Recv != nil && receiverName(fd.Recv.List[0].Type) == recv {
			return true
		}
	}
	return false
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// TestEveryPageIsInTheBook: each page of docs/ opens, after its title,
// with who it is for, and docs/README.md, the book's contents, links it.
func TestEveryPageIsInTheBook(t *testing.T) {
	index := read(t, "docs/README.md")
	for _, page := range pages(t) {
		if !strings.HasPrefix(page, "docs"+string(filepath.Separator)) {
			continue
		}
		text := read(t, page)
		_, rest, _ := strings.Cut(text, "\n")
		if !strings.HasPrefix(strings.TrimLeft(rest, "\n"), "For ") {
			t.Errorf("%s does not open with who it is for (a paragraph beginning \"For \" after the title)", page)
		}
		if name := filepath.Base(page); name != "README.md" && !strings.Contains(index, "]("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
}
