package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

type initOptions struct {
	force bool
}

func newInitCmd(g *globalOptions) *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter configuration file",
		Long: `Write a commented starter configuration to --config, or to
$XDG_CONFIG_HOME/lazaret/config.toml (default ~/.config/lazaret/config.toml).
An existing file is never overwritten unless --force is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runInit(g, o) },
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite an existing configuration file")
	return cmd
}

var errConfigExists = errors.New("configuration file already exists")

func runInit(g *globalOptions, o *initOptions) error {
	path := g.configPath
	if path == "" {
		var err error
		if path, err = config.DefaultPath(); err != nil {
			return err
		}
	}
	if err := writeStarter(path, o.force); err != nil {
		return err
	}
	fmt.Fprintf(g.io.Out, "wrote %s\nnext: edit it, then run `lazaret config check`\n", path)
	return nil
}

// writeStarter writes the starter file through a temporary file in the same
// directory, so that an interrupted init leaves no half-written
// configuration; without force, a hard link makes the final step fail if
// the file appeared in the meantime.
func writeStarter(path string, force bool) error {
	if !force {
		if _, err := os.Lstat(path); err == nil {
			return withHint(fmt.Errorf("%s: %w", path, errConfigExists), exitFailure,
				"keep it (check it with `lazaret config check`) or pass --force to replace it")
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config.toml.tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(config.Starter); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if force {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return withHint(fmt.Errorf("%s: %w", path, errConfigExists), exitFailure,
				"keep it (check it with `lazaret config check`) or pass --force to replace it")
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
