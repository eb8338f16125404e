package unixsock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// umaskCalls returns the positions of calls to any X.Umask in the Go
// source src.
func umaskCalls(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Umask" {
				out = append(out, fset.Position(c.Pos()).String())
			}
		}
		return true
	})
	return out, nil
}

// TestNoUmaskInTree: no non-test Go file of lazaret changes the umask:
// every lazaret process runs goroutines in parallel, and the umask is
// process-wide. Positive control: the scan finds the pattern it replaced.
func TestNoUmaskInTree(t *testing.T) {
	fset := token.NewFileSet()
	ctl, err := umaskCalls(fset, "old.go", "package p\nimport \"syscall\"\nfunc f() { old := syscall.Umask(0o177); syscall.Umask(old) }\n")
	if err != nil || len(ctl) != 2 {
		t.Fatalf("positive control: found %v (%v), want 2 calls", ctl, err)
	}
	root := filepath.Join("..", "..")
	var found []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		calls, err := umaskCalls(fset, p, nil)
		found = append(found, calls...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Fatalf("umask changed in a multi-goroutine process at %v: bind then chmod instead (internal/unixsock)", found)
	}
}
