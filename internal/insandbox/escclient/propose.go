package escclient

import (
	"flag"
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/wire/escwire"
)

// proposalFlags are the proposal loop's flags: --propose net|exec,
// --why, --wait ID, --denials.
type proposalFlags struct {
	propose, why, wait *string
	denials            *bool
}

func loopFlags(fs *flag.FlagSet) *proposalFlags {
	return &proposalFlags{
		propose: fs.String("propose", "", "propose a rule: net HOST[:PORT], or exec -- CMD [ARG...]"),
		why:     fs.String("why", "", "why the rule is needed (shown to the user)"),
		wait:    fs.String("wait", "", "wait for the decision on proposal ID"),
		denials: fs.Bool("denials", false, "list this sandbox's recent network denials"),
	}
}

func (f *proposalFlags) any() bool { return *f.propose != "" || *f.wait != "" || *f.denials }

// request is the loop's request after fs was parsed; msg says what is
// wrong with the command line (a usage error). A --why (or --reason)
// after the host of --propose net is read too.
func (f *proposalFlags) request(fs *flag.FlagSet, shell, reason string) (r request, msg string) {
	n := 0
	for _, set := range []bool{*f.propose != "", *f.wait != "", *f.denials} {
		if set {
			n++
		}
	}
	if n > 1 {
		return r, "give one of --propose, --wait and --denials"
	}
	if shell != "" {
		return r, "--shell is for a host command, not with --propose, --wait or --denials"
	}
	rest := fs.Args()
	switch {
	case *f.wait != "":
		if len(rest) > 0 || !escwire.ValidProposalID(*f.wait) {
			return r, fmt.Sprintf("--wait takes one proposal id (8 lowercase hex digits, as --propose printed it), got %q", *f.wait)
		}
		return request{kind: escwire.KindWait, proposalID: *f.wait}, ""
	case *f.denials:
		if len(rest) > 0 {
			return r, "--denials takes no arguments"
		}
		return request{kind: escwire.KindDenials}, ""
	}
	r = request{kind: escwire.KindPropose, proposal: *f.propose}
	switch *f.propose {
	case escwire.ProposeNet:
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return r, "--propose net needs HOST[:PORT]"
		}
		r.target = rest[0]
		if err := fs.Parse(rest[1:]); err != nil {
			return r, err.Error()
		}
		if *f.wait != "" || *f.denials {
			return r, "give one of --propose, --wait and --denials"
		}
		if len(fs.Args()) > 0 {
			return r, fmt.Sprintf("--propose net takes one HOST[:PORT], got also %q", fs.Args()[0])
		}
		if len(r.target) > escwire.MaxTarget {
			return r, fmt.Sprintf("--propose net: HOST of %d bytes is longer than any host name", len(r.target))
		}
	case escwire.ProposeExec:
		if len(rest) == 0 || rest[0] == "" {
			return r, "--propose exec needs -- CMD [ARG...]"
		}
		r.argv = rest
	default:
		return r, fmt.Sprintf("--propose %q: want net or exec", *f.propose)
	}
	r.reason = *f.why
	if r.reason == "" {
		r.reason = reason
	}
	return r, ""
}
