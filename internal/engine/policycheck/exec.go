package policycheck

import (
	"fmt"
	"slices"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// CheckExec checks a proposed auto_approve entry (one command line, as
// the configuration would hold it): every refusal config itself makes is
// a Refuse finding; a program that runs what files in the workspace say
// (make, npm, cargo…) reads agent-writable files, which a human must
// weigh.
func CheckExec(p Policy, entry string) (Result, error) {
	if len(entry) > MaxCandidate {
		return Result{}, fmt.Errorf("%d bytes: longer than any rule a human can review", len(entry))
	}
	r := Result{Version: Version, Kind: "exec", Rule: entry}
	argv, err := config.ParseAutoApprove(entry)
	if err != nil {
		r.Findings = append(r.Findings, Finding{CodeExecRefused, Refuse, err.Error()})
		return r, nil
	}
	if in := config.ScriptRunner(argv); in != "" {
		r.Findings = append(r.Findings, Finding{CodeAgentFiles, Review,
			fmt.Sprintf("%s runs what the workspace's %s says, and the agent writes the workspace", quote(argv[0]), in)})
	}
	for _, have := range p.AutoApprove {
		if slices.Equal(have, argv) {
			r.Findings = append(r.Findings, Finding{CodeAlready, Info, "already in auto_approve"})
			break
		}
	}
	return r, nil
}
