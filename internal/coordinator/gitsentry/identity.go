package gitsentry

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
)

// The user's commit identity usually lives in ~/.gitconfig, which is not in
// the sandbox (it may hold credential helpers and URL rewrites with
// tokens). Git in the sandbox gets just user.name and user.email from it,
// as its *system* config: the lowest level, so the repository's own values
// (which the sandbox reads live) and anything the agent sets with
// `git config --global` still win, exactly as on the host.

// ContainerSystemConfig is where the sandbox's git finds its system config
// (GIT_CONFIG_SYSTEM); it includes the image's /etc/gitconfig.
const ContainerSystemConfig = "/run/lazaret/gitconfig"

// identityKeys are the only settings of the user's configuration that go.
var identityKeys = map[string]bool{"user.name": true, "user.email": true}

// GlobalIdentity returns user.name and user.email from the user's global
// (or the host's system) git configuration, as host git reads them in dir,
// as key, value pairs. Values set by the repository itself do not count;
// unprintable ones are left out.
func GlobalIdentity(ctx context.Context, g *hostgit.Git, dir string) []string {
	out, err := g.ConfigScopedRegexp(ctx, dir, `^user\.(name|email)$`)
	if err != nil {
		return nil // exit 1: neither is set
	}
	last := map[string]string{}
	recs := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(recs); i += 2 {
		scope := string(recs[i])
		key, value, ok := strings.Cut(string(recs[i+1]), "\n")
		if ok && identityKeys[key] && (scope == "global" || scope == "system") {
			last[key] = value // later (more specific) config wins
		}
	}
	var kv []string
	for _, key := range []string{"user.name", "user.email"} {
		if v := last[key]; v != "" && !strings.ContainsFunc(v, unicode.IsControl) {
			kv = append(kv, key, v)
		}
	}
	return kv
}

// systemConfig is the sandbox's git system config for identity (key,
// value pairs of user.*).
func systemConfig(identity []string) string {
	var b strings.Builder
	b.WriteString("# Written by lazaret (Git Sentry): the user's git identity, below\n# everything else.\n")
	b.WriteString("[include]\n\tpath = /etc/gitconfig\n[user]\n")
	for i := 0; i+1 < len(identity); i += 2 {
		fmt.Fprintf(&b, "\t%s = %s\n", strings.TrimPrefix(identity[i], "user."), quoteConfigValue(identity[i+1]))
	}
	return b.String()
}

// quoteConfigValue quotes v for a git config file: inside double quotes
// only '"' and '\' need escaping (control characters never get here).
func quoteConfigValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// SystemConfigFile is the host file mounted at ContainerSystemConfig.
func SystemConfigFile(domainRoot string) string {
	return filepath.Join(domainRoot, "gitsentry", "system.gitconfig")
}

// addIdentity gives git in the sandbox the user's global commit identity,
// unless the profile chose its own system config.
func (c *Component) addIdentity(ctx context.Context, spec *podman.ContainerSpec) error {
	if _, set := spec.Env["GIT_CONFIG_SYSTEM"]; set {
		return nil
	}
	identity := GlobalIdentity(ctx, c.Git, c.Anchor.Workspace)
	if len(identity) == 0 {
		return nil
	}
	path := SystemConfigFile(c.Anchor.Root())
	if err := writeMountedFile(path, systemConfig(identity)); err != nil {
		return fmt.Errorf("writing the sandbox's git identity: %w", err)
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	spec.Env["GIT_CONFIG_SYSTEM"] = ContainerSystemConfig
	spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: path, Target: ContainerSystemConfig, ReadOnly: true})
	return nil
}
