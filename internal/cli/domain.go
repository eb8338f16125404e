package cli

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

type domainOptions struct {
	profile     string // PROFILE, or the deprecated --profile
	profileFlag string
	json        bool
}

func newDomainCmd(g *globalOptions) *cobra.Command {
	o := &domainOptions{}
	cmd := &cobra.Command{
		Use:   "domain [PROFILE]",
		Short: "Print the Domain Anchor of the current directory, every host resource it scopes and the profile's volumes",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.profile, err = g.profileOf(cmd, firstArg(args), o.profileFlag, ""); err != nil {
				return err
			}
			return runDomain(g, o)
		},
	}
	addDeprecatedProfileFlag(g, cmd, false, &o.profileFlag)
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

// domainJSON is the stable JSON form of `lazaret domain --json`; resources
// is an object so scripts can pick a path by name (keys sorted).
type domainJSON struct {
	Profile   string            `json:"profile"`
	Workspace string            `json:"workspace"`
	Hash      string            `json:"hash"`
	Resources map[string]string `json:"resources"`
	Volumes   []volumeJSON      `json:"volumes"`
}

// volumeJSON is one of the profile's volumes resolved for this domain.
type volumeJSON struct {
	Host      string   `json:"host"`
	Container string   `json:"container"`
	ReadOnly  bool     `json:"read_only"`
	Options   []string `json:"options"`
}

// resources is the domain's resource table with the overlay root the
// State Anchor really uses: the profile's (shared by its workspaces) or
// the domain's own, by the profile's persist mode (statestore.Locate).
func resources(p *config.Profile, a *domain.Anchor) []domain.Resource {
	rs := a.Resources()
	for i := range rs {
		if rs[i].Name == "overlay_root" {
			rs[i].Value = statestore.Locate(a, p.Persist).Root
		}
	}
	return rs
}

func runDomain(g *globalOptions, o *domainOptions) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, o.profile, "")
	if err != nil {
		return err
	}
	vols, err := p.ResolveVolumes(config.AnchorTokens(a))
	if err != nil {
		return err
	}
	if o.json {
		out := domainJSON{Profile: a.Profile, Workspace: a.Workspace, Hash: a.Hash, Resources: map[string]string{}, Volumes: []volumeJSON{}}
		for _, r := range resources(p, a) {
			out.Resources[r.Name] = r.Value
		}
		for _, v := range vols {
			out.Volumes = append(out.Volumes, volumeJSON{Host: v.Host, Container: v.Container, ReadOnly: v.ReadOnly, Options: append([]string{}, v.Options...)})
		}
		enc := json.NewEncoder(g.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := newTable(g.io.Out, "")
	fmt.Fprintf(w, "profile\t%s\nworkspace\t%s\nhash\t%s\n", a.Profile, a.Workspace, a.Hash)
	for _, r := range resources(p, a) {
		fmt.Fprintf(w, "%s\t%s\n", r.Name, r.Value)
	}
	for _, v := range vols {
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		fmt.Fprintf(w, "volume\t%s -> %s (%s)\n", v.Host, v.Container, strings.Join(append([]string{mode}, v.Options...), ","))
	}
	return w.Flush()
}
