// Package fsmtest is the conformance check of the Git Sentry's fsmonitor,
// shared by its unit test (host inotify) and the integration test (inside
// runsc): a work tree to seed, a script of edits that compares git status
// with the fsmonitor against a full scan after each one, and the parser
// of its report.
package fsmtest

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Steps is the bash script (steps.sh); see its header.
//
//go:embed steps.sh
var Steps string

// Dirs and Files size the seeded tree: Dirs directories src/dNN with
// Files files fNN.txt each.
const (
	Dirs  = 12
	Files = 10
)

// Seed writes the tree into dir (committing it is the caller's business).
func Seed(dir string) error {
	for d := 1; d <= Dirs; d++ {
		sub := filepath.Join(dir, "src", fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		for f := 1; f <= Files; f++ {
			content := fmt.Sprintf("dir %d file %d\n", d, f)
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d.txt", f)), []byte(content), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// Report is the parsed output of Steps.
type Report struct {
	Done        bool
	Mismatches  []string // step names
	Incremental []string // steps where git applied a path list
}

// Parse reads Steps' output.
func Parse(out string) Report {
	var r Report
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "DONE":
			r.Done = true
		case strings.HasPrefix(l, "MISMATCH "):
			r.Mismatches = append(r.Mismatches, strings.TrimPrefix(l, "MISMATCH "))
		case strings.HasPrefix(l, "INCREMENTAL "):
			r.Incremental = append(r.Incremental, strings.TrimPrefix(l, "INCREMENTAL "))
		}
	}
	return r
}

// Liar is a core.fsmonitor hook that forwards to the real hook and then
// drops every path, "/" included: it always claims nothing changed. The
// control run uses it to show the comparison catches a stale fsmonitor.
func Liar(realHook string) string {
	return "#!/bin/sh\nt=$(" + realHook + " \"$@\" | tr '\\000' '\\n' | head -n 1)\nprintf '%s\\000' \"$t\"\n"
}
