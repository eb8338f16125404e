package clicore

import (
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// ConfigHint says what to do about configuration errors, true to the
// first one: a key of the file, the TOML syntax, the file itself, the
// profile or workspace of the command line, or where the file is looked
// for. listed is true when every error was printed (`lazaret config check`).
func ConfigHint(errs []*config.Error, listed bool) string {
	e := errs[0]
	for _, x := range errs {
		if x.IsSecurity {
			e = x // the refusal matters most
			break
		}
	}
	// With more than one problem, the message itself ends "(and N more;
	// run `lazaret config check`)".
	key := "the key named above"
	if listed && len(errs) > 1 {
		key = "the keys named above"
	}
	switch {
	case e.Key == config.WorkspaceKey:
		return "run lazaret in a project directory (not /, a system directory, or a directory containing lazaret's data_root)"
	case e.Key == config.ProfileKey:
		return "name a profile defined in the configuration, or add [profiles.<name>] to it (`lazaret init` writes an example)"
	case e.IsSecurity && e.Key == "":
		return "lazaret reads only a configuration file owned by you (or root) and not writable by others: fix its owner or mode"
	case e.IsSecurity:
		return "the configuration asks for something unsafe: change " + key + " (see " + locate.Doc("CONFIG.md") + ")"
	case e.Key != "":
		return "fix " + key + " (see " + locate.Doc("CONFIG.md") + ")"
	case e.Line > 0:
		return "fix the TOML syntax on the line named above (see " + locate.Doc("CONFIG.md") + ")"
	case e.File != "":
		return "the configuration must be a readable regular file of at most 1 MiB; pass another with --config"
	}
	return "set HOME (or XDG_CONFIG_HOME), or pass --config FILE"
}
