// Package lint holds checks of the source tree that go vet does not make.
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be outside tests and
// benchmarks: a longer one does several things, each of which wants a name.
const maxFuncLines = 80

// TestFunctionLength fails for every non-test function of the module longer
// than maxFuncLines lines (from its func line to its closing brace).
func TestFunctionLength(t *testing.T) {
	for _, f := range longFunctions(t, "../..") {
		t.Errorf("%s is %d lines (at most %d): split it into named steps", f.pos, f.lines, maxFuncLines)
	}
}

// TestFunctionLengthControl proves the check can fail: a synthetic long
// function is reported.
func TestFunctionLengthControl(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	writeFile(t, filepath.Join(dir, "p.go"), src)
	writeFile(t, filepath.Join(dir, "p_test.go"), src)
	got := longFunctions(t, dir)
	if len(got) != 1 || !strings.HasSuffix(got[0].pos, "p.go:3") {
		t.Fatalf("long functions = %+v, want p.go:3 only", got)
	}
}

type longFunc struct {
	pos   string
	lines int
}

func longFunctions(t *testing.T, root string) []longFunc {
	t.Helper()
	var out []longFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				out = append(out, longFunc{pos: filepath.ToSlash(path) + ":" + itoa(start.Line), lines: n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
