package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// walks are the kinds whose uncontended Lock and Unlock TestLockWalk runs,
// each with the most of reentrant's own files (outside reentrant/internal/)
// the pair may enter, today's figure, and files it must not enter at all:
// a lock's wait protocol is chosen once per handle, so a pair of one kind
// walks no other kind's path.
var walks = []struct {
	kind  string
	most  int
	never []string
}{
	{"lock", 11, []string{"reentrant/fair.go", "reentrant/priority.go", "reentrant/group.go", "reentrant/deadlock.go"}},
	{"fair", 14, []string{"reentrant/directed.go", "reentrant/group.go", "reentrant/deadlock.go"}},
	{"priority", 14, []string{"reentrant/directed.go", "reentrant/group.go", "reentrant/deadlock.go"}},
	{"group", 12, []string{"reentrant/directed.go", "reentrant/fair.go", "reentrant/priority.go", "reentrant/deadlock.go"}},
	{"spin", 11, []string{"reentrant/directed.go", "reentrant/fair.go", "reentrant/priority.go", "reentrant/group.go", "reentrant/deadlock.go"}},
	{"write", 12, []string{"reentrant/directed.go", "reentrant/fair.go", "reentrant/priority.go", "reentrant/group.go", "reentrant/deadlock.go"}},
}

// module is the import path every file of the walk is named under.
const module = "github.com/relock-go/relock/"

// TestLockWalk runs one uncontended Lock and its Unlock of each kind in
// walks on a real Redis, with coverage counters cleared before the pair and
// written after it (see ./walk), and holds what it entered to the walk's
// limits. docs/lock-flow.md lists the plain lock's files; that list is
// held to what ran. go test -v prints the figures.
func TestLockWalk(t *testing.T) {
	srv := redistest.Start(t)
	bin := filepath.Join(t.TempDir(), "walk")
	build := exec.Command("go", "build", "-cover", "-covermode=atomic", "-coverpkg="+module+"...", "-o", bin, "./walk")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the walk: %v\n%s", err, out)
	}
	for _, w := range walks {
		entered := walk(t, bin, srv.Addr, w.kind)
		files := filesOf(entered)
		var own []string
		for _, f := range files {
			if dir, _ := filepath.Split(f); dir == "reentrant/" {
				own = append(own, f)
			}
		}
		t.Logf("%s: %d functions in %d files, %d of them reentrant's own: %s", w.kind, len(entered), len(files), len(own), strings.Join(own, " "))
		if testing.Verbose() && w.kind == "lock" {
			for _, f := range files {
				t.Logf("  %s: %s", f, strings.Join(functionsIn(entered, f), ", "))
			}
		}
		if len(own) > w.most {
			t.Errorf("an uncontended %s and its Unlock enter %d of reentrant's files, at most %d: %s", w.kind, len(own), w.most, strings.Join(own, " "))
		}
		for _, f := range w.never {
			if slices.Contains(files, f) {
				t.Errorf("an uncontended %s and its Unlock enter %s: %s", w.kind, f, strings.Join(functionsIn(entered, f), ", "))
			}
		}
		if w.kind == "lock" {
			checkFlowDoc(t, files)
		}
	}
}

// walk runs the walk of kind and returns the functions it entered, as
// "file: name" with file relative to the module root.
func walk(t *testing.T, bin, addr, kind string) []string {
	t.Helper()
	counters, junk := t.TempDir(), t.TempDir()
	run := exec.Command(bin, "-addr", addr, "-kind", kind, "-dir", counters)
	run.Env = append(os.Environ(), "GOCOVERDIR="+junk)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("walking %s: %v\n%s", kind, err, out)
	}
	blocks := filepath.Join(t.TempDir(), "blocks.txt")
	if out, err := exec.Command("go", "tool", "covdata", "textfmt", "-i", counters, "-o", blocks).CombinedOutput(); err != nil {
		t.Fatalf("reading the counters of %s: %v\n%s", kind, err, out)
	}
	entered, err := enteredFunctions(blocks)
	if err != nil {
		t.Fatalf("the walk of %s: %v", kind, err)
	}
	if len(entered) == 0 {
		t.Fatalf("the walk of %s entered nothing", kind)
	}
	return entered
}

// enteredFunctions returns the functions of the module that a coverage
// profile (covdata textfmt) counts a run of any block of, as "file: name",
// sorted: a block, not a share of statements, so that a function with no
// statements counts when it ran. A function literal's blocks are its
// enclosing function's.
func enteredFunctions(profile string) ([]string, error) {
	data, err := os.ReadFile(profile)
	if err != nil {
		return nil, err
	}
	funcs := map[string][]funcSpan{} // by file
	var entered []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// path/file.go:line.col,line.col statements count
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] == "0" || !strings.HasPrefix(fields[0], module) {
			continue
		}
		file, pos, _ := strings.Cut(strings.TrimPrefix(fields[0], module), ":")
		if strings.HasPrefix(file, "internal/codefigures/") {
			continue // the walk itself
		}
		var line, col int
		if _, err := fmt.Sscanf(pos, "%d.%d,", &line, &col); err != nil {
			return nil, fmt.Errorf("%s: %v", sc.Text(), err)
		}
		spans, ok := funcs[file]
		if !ok {
			if spans, err = functionSpans(file); err != nil {
				return nil, err
			}
			funcs[file] = spans
		}
		for _, f := range spans {
			if f.contains(line, col) {
				entered = append(entered, file+": "+f.name)
				break
			}
		}
	}
	slices.Sort(entered)
	return slices.Compact(entered), sc.Err()
}

// funcSpan is where a function declaration's text lies.
type funcSpan struct {
	name                       string
	line, col, endLine, endCol int
}

func (f funcSpan) contains(line, col int) bool {
	after := line > f.line || line == f.line && col >= f.col
	before := line < f.endLine || line == f.endLine && col <= f.endCol
	return after && before
}

// functionSpans returns the function declarations of the module's file,
// named as covdata names them: "f", "T.m" or "*T.m".
func functionSpans(file string) ([]funcSpan, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", file), nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var spans []funcSpan
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			recv, star := fd.Recv.List[0].Type, ""
			if s, ok := recv.(*ast.StarExpr); ok {
				recv, star = s.X, "*"
			}
			switch r := recv.(type) {
			case *ast.IndexExpr:
				recv = r.X
			case *ast.IndexListExpr:
				recv = r.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				name = star + id.Name + "." + name
			}
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		spans = append(spans, funcSpan{name, start.Line, start.Column, end.Line, end.Column})
	}
	return spans, nil
}

// filesOf returns the files of entered, sorted.
func filesOf(entered []string) []string {
	var files []string
	for _, e := range entered {
		file, _, _ := strings.Cut(e, ": ")
		files = append(files, file)
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// functionsIn returns the functions of entered in file.
func functionsIn(entered []string, file string) []string {
	var fns []string
	for _, e := range entered {
		if f, name, _ := strings.Cut(e, ": "); f == file {
			fns = append(fns, name)
		}
	}
	return fns
}

// walkedRE finds the files docs/lock-flow.md lists as walked: the lines
// "- `path.go`" of its section "Every file they enter".
var walkedRE = regexp.MustCompile("(?m)^- `([^`]+\\.go)`")

// checkFlowDoc holds docs/lock-flow.md's list of the files a plain Lock
// and its Unlock enter to files, the ones they entered.
func checkFlowDoc(t *testing.T, files []string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/lock-flow.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Every file they enter\n")
	if !ok {
		t.Fatal(`docs/lock-flow.md has no section "Every file they enter"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range walkedRE.FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	for _, f := range files {
		if _, found := slices.BinarySearch(listed, f); !found {
			t.Errorf("docs/lock-flow.md does not list %s, which a plain Lock and its Unlock enter", f)
		}
	}
	for _, f := range listed {
		if _, found := slices.BinarySearch(files, f); !found {
			t.Errorf("docs/lock-flow.md lists %s, which a plain Lock and its Unlock do not enter", f)
		}
	}
}
