// Command codefigures prints the shape figures of the code relock ships,
// measured with go/ast and go/types over the non-test files of every
// package a user builds (reentrant and its add-ons, scripts, pubsub,
// watchdog, the machinery behind their internal/ walls, and cmd/relock):
//
//   - the longest function (lines) and the one with most branch points (if,
//     for, range, case and select clauses, && and ||);
//   - the acquire loops: for statements in reentrant counting attempts
//     (their init declares "attempt");
//   - Client's fields and methods;
//   - reentrant's file-level graph (a file uses another when it names
//     something declared there) laid out in layers, and the edges that run
//     back up those layers: a file that uses a file which uses it, directly
//     or through others;
//   - the most of reentrant's files one file calls into (names a function or
//     method declared there);
//   - the largest group of reentrant's files that all depend on one another
//     (a strongly connected component of that graph), and the pairs of
//     files that use each other; and the same of every other package,
//     each held to none but for those in knotLimits.
//
// Run it from the module root: go run ./internal/codefigures. With -check
// it exits 1 when a figure is past its limit (see limits); CI runs it so.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// packages are those that ship; the ones under reentrant/internal/ and
// scripts/internal/ are found when it runs, so machinery moved behind a
// wall is still measured.
var packages = append([]string{"reentrant", "reentrant/election", "reentrant/events", "reentrant/fence", "reentrant/quiet", "reentrant/reentranttest",
	"scripts", "pubsub", "watchdog", "cmd/relock"}, internalPackages()...)

func internalPackages() []string {
	var dirs []string
	for _, parent := range []string{"reentrant", "scripts"} {
		found, err := filepath.Glob(filepath.Join(parent, "internal", "*"))
		check(err)
		dirs = append(dirs, found...)
	}
	return dirs
}

// wantedBranches is the most branch points wanted of a function; those
// past it are listed.
const wantedBranches = 15

// limits are the most each figure may be. Where the code is past the shape
// wanted (in the comment), the limit is the figure it has: it may fall, and
// is lowered with it, but it may not rise, so a feature that would pass one
// changes the structure first.
var limits = []struct {
	name string
	most int
}{
	{"longest function", 60},
	{"most branch points", 15},
	{"Client's unexported methods", 10},
	// reentrant's file graph has no cycle: every arrow runs one way, from
	// the handles' files down to the machinery. A feature that needs an
	// arrow back splits a file first (as lockRef split Lock).
	{"largest group of mutually dependent files", 1},
	{"back edges", 0},
	{"pairs of files using each other", 0},
	// A file that uses most of the others is a hub every change passes
	// through (cycle.go was, before the wakers).
	{"most of reentrant's files one file calls into", 10},
}

// knotLimits are the packages whose file graph is past the shape wanted
// (no group of files that use one another): the figure each has, which may
// fall and may not rise. Every other package's is 1 and 0.
var knotLimits = map[string]struct{ group, pairs int }{
	"scripts": {3, 3}, // a script call, its replica sync and its coalescing
	"pubsub":  {2, 1}, // a connection and its subscriber
}

func main() {
	checkLimits := flag.Bool("check", false, "exit 1 when a figure is past its limit")
	flag.Parse()
	fset := token.NewFileSet()
	var longest, branchiest fnFigure
	var branchy []fnFigure
	loops := []string{}
	for _, dir := range packages {
		for _, f := range parseDir(fset, dir) {
			for _, d := range f.file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				fig := measure(fset, f.name, fn)
				if fig.lines > longest.lines {
					longest = fig
				}
				if fig.branches > branchiest.branches {
					branchiest = fig
				}
				if fig.branches > wantedBranches {
					branchy = append(branchy, fig)
				}
				if dir == "reentrant" {
					loops = append(loops, acquireLoops(fset, f.name, fn)...)
				}
			}
		}
	}
	fmt.Printf("longest function: %d lines (%s)\n", longest.lines, longest.name)
	fmt.Printf("most branch points: %d (%s)\n", branchiest.branches, branchiest.name)
	sort.Slice(branchy, func(i, j int) bool { return branchy[i].branches > branchy[j].branches })
	for _, f := range branchy {
		fmt.Printf("  past %d: %d (%s)\n", wantedBranches, f.branches, f.name)
	}
	fmt.Printf("acquire loops: %d\n", len(loops))
	for _, l := range loops {
		fmt.Printf("  %s\n", l)
	}
	files, info := checkReentrant(fset)
	fields, methods, unexported := clientShape(info)
	fmt.Printf("Client: %d fields, %d methods (%d unexported)\n", fields, methods, unexported)
	graph := fileGraph(fset, files, info)
	back := backEdges(graph)
	fmt.Printf("back edges in reentrant's file graph: %d\n", len(back))
	for _, e := range back {
		fmt.Printf("  %s\n", e)
	}
	widest, uses := widestFile(callGraph(fset, files, info))
	fmt.Printf("most of reentrant's files one file calls into: %d (%s)\n", uses, widest)
	group := largestGroup(graph)
	fmt.Printf("largest group of mutually dependent files: %d of %d, %d pairs of files using each other\n", len(group), len(files), mutualPairs(graph))
	fmt.Printf("  %s\n", strings.Join(group, " "))

	// Every other package's file graph, each held to its own limit.
	var knots []string
	for _, dir := range packages {
		if dir == "reentrant" {
			continue
		}
		files, info := checkPackage(fset, dir)
		g := fileGraph(fset, files, info)
		group, pairs := largestGroup(g), mutualPairs(g)
		if len(group) > 1 || pairs > 0 {
			fmt.Printf("%s: largest group of mutually dependent files: %d of %d, %d pairs of files using each other\n  %s\n", dir, len(group), len(files), pairs, strings.Join(group, " "))
		}
		most := knotLimits[dir]
		if len(group) > max(most.group, 1) || pairs > most.pairs {
			knots = append(knots, fmt.Sprintf("%s's file graph: a group of %d, %d pairs; at most %d and %d", dir, len(group), pairs, max(most.group, 1), most.pairs))
		}
	}

	figures := map[string]int{
		"longest function":                              longest.lines,
		"most branch points":                            branchiest.branches,
		"Client's unexported methods":                   unexported,
		"largest group of mutually dependent files":     len(group),
		"back edges":                                    len(back),
		"pairs of files using each other":               mutualPairs(graph),
		"most of reentrant's files one file calls into": uses,
	}
	passed := false
	for _, l := range limits {
		if figures[l.name] > l.most {
			fmt.Printf("past its limit: %s %d, at most %d\n", l.name, figures[l.name], l.most)
			passed = true
		}
	}
	for _, k := range knots {
		fmt.Printf("past its limit: %s\n", k)
		passed = true
	}
	if *checkLimits && passed {
		os.Exit(1)
	}
}

type parsedFile struct {
	name string
	file *ast.File
}

func parseDir(fset *token.FileSet, dir string) []parsedFile {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	check(err)
	var out []parsedFile
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, filepath.Base(p)); err != nil || !ok {
			continue // built for another system (cmd/relock's guard)
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		check(err)
		out = append(out, parsedFile{p, f})
	}
	return out
}

type fnFigure struct {
	name            string
	lines, branches int
}

func measure(fset *token.FileSet, file string, fn *ast.FuncDecl) fnFigure {
	name := fn.Name.Name
	if fn.Recv != nil && len(fn.Recv.List) > 0 {
		name = types.ExprString(fn.Recv.List[0].Type) + "." + name
	}
	fig := fnFigure{name: file + ": " + name}
	fig.lines = fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt, *ast.CaseClause, *ast.CommClause:
			fig.branches++
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				fig.branches++
			}
		}
		return true
	})
	return fig
}

// acquireLoops finds the for statements in fn that count attempts.
func acquireLoops(fset *token.FileSet, file string, fn *ast.FuncDecl) []string {
	var out []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		loop, ok := n.(*ast.ForStmt)
		if !ok || loop.Init == nil {
			return true
		}
		if as, ok := loop.Init.(*ast.AssignStmt); ok {
			for _, lhs := range as.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && id.Name == "attempt" {
					out = append(out, fmt.Sprintf("%s:%d (%s)", file, fset.Position(loop.Pos()).Line, fn.Name.Name))
				}
			}
		}
		return true
	})
	return out
}

func checkReentrant(fset *token.FileSet) ([]parsedFile, *types.Info) {
	return checkPackage(fset, "reentrant")
}

// checkPackage type-checks the non-test files of the package in dir.
func checkPackage(fset *token.FileSet, dir string) ([]parsedFile, *types.Info) {
	files := parseDir(fset, dir)
	var asts []*ast.File
	for _, f := range files {
		asts = append(asts, f.file)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	_, err := conf.Check(modulePath+"/"+dir, fset, asts, info)
	check(err)
	return files, info
}

const modulePath = "github.com/relock-go/relock"

func clientShape(info *types.Info) (fields, methods, unexported int) {
	for id, obj := range info.Defs {
		if id.Name != "Client" || obj == nil {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.Parent() != tn.Pkg().Scope() {
			continue
		}
		named := tn.Type().(*types.Named)
		for i := range named.NumMethods() {
			if !named.Method(i).Exported() {
				unexported++
			}
		}
		return named.Underlying().(*types.Struct).NumFields(), named.NumMethods(), unexported
	}
	return 0, 0, 0
}

// largestGroup returns the largest strongly connected component of graph
// (files that all reach one another), sorted: Tarjan's algorithm.
func largestGroup(graph map[string]map[string]bool) []string {
	var nodes []string
	for n := range graph {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack, best []string
	var visit func(n string)
	visit = func(n string) {
		index[n], low[n] = len(index), len(index)
		stack = append(stack, n)
		onStack[n] = true
		for m := range graph[n] {
			if _, seen := index[m]; !seen {
				visit(m)
				low[n] = min(low[n], low[m])
			} else if onStack[m] {
				low[n] = min(low[n], index[m])
			}
		}
		if low[n] != index[n] {
			return
		}
		var group []string
		for {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[m] = false
			group = append(group, m)
			if m == n {
				break
			}
		}
		if len(group) > len(best) {
			sort.Strings(group)
			best = group
		}
	}
	for _, n := range nodes {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	return best
}

// mutualPairs counts the pairs of files that use each other.
// widestFile returns the file of graph that uses the most others, and how
// many.
func widestFile(graph map[string]map[string]bool) (string, int) {
	var widest string
	most := -1
	for f, uses := range graph {
		if len(uses) > most || len(uses) == most && f < widest {
			widest, most = f, len(uses)
		}
	}
	return widest, most
}

func mutualPairs(graph map[string]map[string]bool) int {
	n := 0
	for a, uses := range graph {
		for b := range uses {
			if a < b && graph[b][a] {
				n++
			}
		}
	}
	return n
}

// fileGraph maps each file of reentrant to the set of other files whose
// package-level declarations (methods and fields included) it uses.
func fileGraph(fset *token.FileSet, files []parsedFile, info *types.Info) map[string]map[string]bool {
	return graphOf(fset, files, info, func(types.Object) bool { return true })
}

// callGraph maps each file to the set of other files whose functions or
// methods it names: the files it calls into.
func callGraph(fset *token.FileSet, files []parsedFile, info *types.Info) map[string]map[string]bool {
	return graphOf(fset, files, info, func(obj types.Object) bool {
		_, ok := obj.(*types.Func)
		return ok
	})
}

// graphOf is fileGraph counting only the objects keep keeps.
func graphOf(fset *token.FileSet, files []parsedFile, info *types.Info, keep func(types.Object) bool) map[string]map[string]bool {
	pkg := modulePath + "/" + filepath.Dir(files[0].name)
	declaredIn := func(obj types.Object) string {
		if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != pkg {
			return ""
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != obj.Pkg().Scope() {
			return "" // a local variable
		}
		if _, ok := obj.(*types.Func); !ok && obj.Parent() != nil && obj.Parent() != obj.Pkg().Scope() {
			if v, ok := obj.(*types.Var); !ok || !v.IsField() {
				return ""
			}
		}
		return filepath.Base(fset.Position(obj.Pos()).Filename)
	}
	graph := map[string]map[string]bool{}
	for _, f := range files {
		from := filepath.Base(f.name)
		graph[from] = map[string]bool{}
		ast.Inspect(f.file, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			if obj := info.Uses[id]; keep(obj) {
				if to := declaredIn(obj); to != "" && to != from {
					graph[from][to] = true
				}
			}
			return true
		})
	}
	return graph
}

// backEdges lays the graph out in layers, users above what they use, by
// the Eades-Lin-Smyth heuristic (sinks to the bottom, sources to the top,
// then the node with the most outgoing minus incoming edges), and returns
// the edges that point up.
func backEdges(graph map[string]map[string]bool) []string {
	left := map[string]bool{}
	for n := range graph {
		left[n] = true
	}
	degree := func(n string) (in, out int) {
		for m := range left {
			if graph[m][n] {
				in++
			}
			if graph[n][m] {
				out++
			}
		}
		return in, out
	}
	sorted := func() []string {
		var ns []string
		for n := range left {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		return ns
	}
	var top, bottom []string
	for len(left) > 0 {
		changed := true
		for changed {
			changed = false
			for _, n := range sorted() {
				in, out := degree(n)
				switch {
				case out == 0:
					bottom = append([]string{n}, bottom...)
				case in == 0:
					top = append(top, n)
				default:
					continue
				}
				delete(left, n)
				changed = true
			}
		}
		if len(left) == 0 {
			break
		}
		best, bestScore := "", 0
		for _, n := range sorted() {
			in, out := degree(n)
			if best == "" || out-in > bestScore {
				best, bestScore = n, out-in
			}
		}
		top = append(top, best)
		delete(left, best)
	}
	order := append(top, bottom...)
	if os.Getenv("CODEFIGURES_GRAPH") != "" {
		for _, n := range order {
			var tos []string
			for to := range graph[n] {
				tos = append(tos, to)
			}
			sort.Strings(tos)
			fmt.Println(n, "->", strings.Join(tos, " "))
		}
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	var back []string
	for _, from := range order {
		var tos []string
		for to := range graph[from] {
			if pos[to] < pos[from] {
				tos = append(tos, to)
			}
		}
		sort.Strings(tos)
		for _, to := range tos {
			back = append(back, from+" -> "+to)
		}
	}
	return back
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "codefigures:", err)
		os.Exit(1)
	}
}
