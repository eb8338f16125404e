package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// file* types mirror the TOML schema. Pointers tell "absent" from "empty".
type fileConfig struct {
	DataRoot   *string                 `toml:"data_root"`
	CABundle   *string                 `toml:"ca_bundle"`
	Network    fileNetwork             `toml:"network"`
	Escalation fileEscalation          `toml:"escalation"`
	Profiles   map[string]*fileProfile `toml:"profiles"`
	Secrets    map[string]*fileSecret  `toml:"secrets"`
	Cluster    fileCluster             `toml:"cluster"`
	Resources  fileResources           `toml:"resources"`
	Session    fileSession             `toml:"session"`
	Notify     fileNotify              `toml:"notify"`
	Policy     filePolicy              `toml:"policy"`
	Attempts   fileAttempts            `toml:"attempts"`
}

type fileNetwork struct {
	AllowEgress  []string `toml:"allow_egress"`
	AllowDomains []string `toml:"allow_domains"`
}

type fileEscalation struct {
	Enabled     *bool    `toml:"enabled"`
	SocketDir   *string  `toml:"socket_dir"`
	AutoApprove []string `toml:"auto_approve"`
	// answer_from and pending_timeout: pending.go.
	AnswerFrom     *string `toml:"answer_from"`
	PendingTimeout *string `toml:"pending_timeout"`
}

type fileProfile struct {
	Image          *string           `toml:"image"`
	PersistentDirs *[]string         `toml:"persistent_dirs"`
	AllowEgress    []string          `toml:"allow_egress"`
	AllowDomains   []string          `toml:"allow_domains"`
	Env            map[string]string `toml:"env"`
	Volumes        []fileVolume      `toml:"volumes"`
	GitMode        *string           `toml:"git_mode"`
	WithChanges    *bool             `toml:"with_changes"`
	Persist        *string           `toml:"persist"`
	CABundle       *string           `toml:"ca_bundle"`
	Secrets        map[string]string `toml:"secrets"`
	WarmPool       *int64            `toml:"warm_pool"`
	// PersistPackageDB false: /usr persists without the package database
	// (pkgstate.go).
	PersistPackageDB *bool `toml:"persist_package_db"`
	// The resource keys, as in [resources] (resources.go).
	Memory      *string  `toml:"memory"`
	CPUs        *float64 `toml:"cpus"`
	Pids        *int64   `toml:"pids"`
	DiskReserve *string  `toml:"disk_reserve"`
	Limits      *string  `toml:"limits"`
}

type fileVolume struct {
	Host      string `toml:"host"`
	Container string `toml:"container"`
	Mode      string `toml:"mode"`
}

// DefaultPersistentDirs are the State Anchor directories of a profile that
// does not set persistent_dirs.
// Besides /usr, dpkg's and apt's state: a package installed in the
// sandbox then stays known to dpkg -l, apt-get remove and autoremove after
// a restart (docs/STATEANCHOR.md, "Default dirs").
var DefaultPersistentDirs = []string{"/usr", "/var/lib/dpkg", "/var/lib/apt"}

// DefaultPath is $XDG_CONFIG_HOME/lazaret/config.toml, else
// ~/.config/lazaret/config.toml.
func DefaultPath() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "lazaret", "config.toml"), nil
	}
	home, err := homeDir()
	if err != nil {
		return "", &Error{Msg: "cannot locate the configuration file: " + err.Error()}
	}
	return filepath.Join(home, ".config", "lazaret", "config.toml"), nil
}

// defaultDataRoot is $XDG_DATA_HOME/lazaret, else ~/.local/share/lazaret.
func defaultDataRoot() string {
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "lazaret")
	}
	return "~/.local/share/lazaret"
}

// Load reads and validates the configuration at path. An empty path means
// the default location, where a missing file is fine (built-in defaults);
// a file named explicitly must exist.
func Load(path string) (*Config, error) { return load(path, false) }

func load(path string, onlyDataRoot bool) (*Config, error) {
	explicit := path != ""
	if !explicit {
		var err error
		if path, err = DefaultPath(); err != nil {
			return nil, err
		}
	}
	data, err := readConfigFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return parseConfig("", nil, onlyDataRoot)
		}
		e := &Error{File: path, Msg: err.Error()}
		var re *ruleError
		if errors.As(err, &re) {
			e.IsSecurity = re.security
		}
		return nil, e
	}
	return parseConfig(path, data, onlyDataRoot)
}

// LoadDataRoot reads the configuration at path for a command that needs
// only where lazaret keeps things (data_root, escalation.socket_dir):
// `lazaret stop --all` must still stop the sandboxes and spares of a
// configuration a later edit broke. A problem in any other key comes back
// as a warning; a file that cannot be read or decoded, or a bad data_root
// or socket_dir, is still an error.
func LoadDataRoot(path string) (*Config, error) { return load(path, true) }

// maxConfigSize bounds what Load reads: a configuration is a few
// kilobytes, and --config /dev/zero must not exhaust memory.
const maxConfigSize = 1 << 20

// readConfigFile reads a regular file of at most maxConfigSize bytes, after
// checking its owner and mode on the opened file itself.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot read: %w", unwrapPathError(err))
		}
		return nil, ruleErrf("cannot read: %v", unwrapPathError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, ruleErrf("cannot read: %v", unwrapPathError(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, ruleErrf("not a regular file")
	}
	if err := checkFileOwner(fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, ruleErrf("cannot read: %v", unwrapPathError(err))
	}
	if len(data) > maxConfigSize {
		return nil, ruleErrf("larger than %d bytes", maxConfigSize)
	}
	return data, nil
}

// Parse validates the configuration document data, read from file (used in
// messages only; empty for built-in defaults).
func Parse(file string, data []byte) (*Config, error) { return parseConfig(file, data, false) }

// parseConfig is Parse; onlyDataRoot turns errors outside data_root and
// escalation.socket_dir into warnings (LoadDataRoot).
func parseConfig(file string, data []byte, onlyDataRoot bool) (*Config, error) {
	pos := indexPositions(data)
	v := &validator{file: file, pos: pos, lookupEnv: os.LookupEnv}
	for _, p := range pos.nul {
		v.fail(p, securityErrf("contains a NUL byte"))
	}
	if len(v.errs) > 0 {
		return nil, v.result()
	}
	var fc fileConfig
	if !v.decodeAll(data, &fc) {
		return nil, v.result()
	}
	cfg := v.build(&fc)
	if onlyDataRoot && !slices.ContainsFunc(v.errs, locatesData) {
		for _, e := range v.errs {
			v.warns = append(v.warns, e.Error())
		}
		v.errs = nil
	}
	if len(v.errs) > 0 {
		// The file is refused anyway: list the unset env:VAR and the
		// secrets whose values cannot be read too, so that one `lazaret
		// config check` shows every problem.
		v.errs = append(v.errs, cfg.HostErrors()...)
		return nil, v.result()
	}
	cfg.File = file
	cfg.Warnings = v.warns
	return cfg, nil
}

// locatesData reports whether e is about a key that says where lazaret
// keeps its data, or about no key at all (the whole file).
func locatesData(e *Error) bool {
	return e.Key == "" || e.Key == "data_root" || e.Key == "escalation.socket_dir"
}

// validator turns the decoded file into a Config, collecting every
// problem with its line.
type validator struct {
	file      string
	pos       *positions
	lookupEnv func(string) (string, bool)
	errs      ErrorList
	warns     []string
}

func (v *validator) fail(p keyPath, err error) {
	e := &Error{File: v.file, Line: v.pos.lookup(p), Key: p.String(), Msg: err.Error()}
	var re *ruleError
	if errors.As(err, &re) {
		e.IsSecurity = re.security
	}
	v.errs = append(v.errs, e)
}

func (v *validator) warn(p keyPath, msg string) {
	e := &Error{File: v.file, Line: v.pos.lookup(p), Key: p.String(), Msg: msg}
	v.warns = append(v.warns, e.Error())
}

func (v *validator) result() error {
	sort.SliceStable(v.errs, func(i, j int) bool { return v.errs[i].Line < v.errs[j].Line })
	if len(v.errs) == 1 {
		return v.errs[0]
	}
	return v.errs
}

var gotTypeRE = regexp.MustCompile(`cannot (?:decode|store) TOML ((?:inline |local )?\w+)`)

// decodeError converts go-toml's errors (syntax, unknown keys, wrong
// types) into one-line *Errors; Go type names never reach the user.
func (v *validator) decodeError(err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		for i := range sm.Errors {
			de := &sm.Errors[i]
			line, _ := de.Position()
			v.errs = append(v.errs, &Error{File: v.file, Line: line, Key: keyPath(de.Key()).String(), Msg: "unknown key"})
		}
		return v.result()
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		key := keyPath(de.Key())
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if m := gotTypeRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("wrong type: got %s, want %s", m[1], expectedType(key))
		} else if strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") {
			msg = "wrong type: want " + expectedType(key)
		}
		v.errs = append(v.errs, &Error{File: v.file, Line: line, Key: key.String(), Msg: msg})
		return v.result()
	}
	v.errs = append(v.errs, &Error{File: v.file, Msg: oneLine(err.Error())})
	return v.result()
}

// expectedType names the TOML type the schema wants at key.
func expectedType(key keyPath) string {
	if len(key) == 0 {
		return "a table"
	}
	last := key[len(key)-1]
	if strings.HasPrefix(last, "[") && len(key) > 1 {
		if key[len(key)-2] == "volumes" {
			return "a table {host, container, mode}"
		}
		return "a string"
	}
	if len(key) == 4 && key[0] == "profiles" && (key[2] == "env" || key[2] == "secrets") {
		return "a string"
	}
	switch last {
	case "data_root", "socket_dir", "image", "git_mode", "host", "container", "mode", "persist", "ca_bundle",
		"value", "refresh", "header", "format",
		"kubeconfig", "context", "namespace", "runtime_class", "image_pull_policy", "probe_image", "cpu", "memory", "netd_image",
		"storage_class", "state_size", "disk_reserve", "limits":
		return "a string"
	case "cpus":
		return "a number"
	case "pids":
		return "an integer"
	case "enabled", "allow_unenforced_egress", "persist_package_db":
		return "a boolean"
	case "with_changes":
		return "a boolean"
	case "warm_pool", "max":
		return "an integer"
	case "allow_egress", "allow_domains", "auto_approve", "persistent_dirs", "hosts", "command", "dns":
		return "an array of strings"
	case "env":
		return "a table of strings"
	case "secrets":
		if len(key) == 3 {
			return "a table of strings (secret name = \"ENV_VAR\")"
		}
	case "volumes":
		return "an array of tables {host, container, mode}"
	}
	return "a table"
}

func (v *validator) build(fc *fileConfig) *Config {
	cfg := &Config{Profiles: map[string]*Profile{}}

	dr := defaultDataRoot()
	if fc.DataRoot != nil {
		dr = *fc.DataRoot
	}
	cfg.DataRoot = v.globalPath(keyPath{"data_root"}, dr)

	v.network(fc, cfg)
	v.cluster(fc, cfg)
	cfg.Resources = v.resources(keyPath{"resources"}, fc.Resources, defaultResources())
	cfg.CABundle = v.caBundle(keyPath{"ca_bundle"}, fc.CABundle, defaultCABundle())

	cfg.Escalation.Enabled = true
	if fc.Escalation.Enabled != nil {
		cfg.Escalation.Enabled = *fc.Escalation.Enabled
	}
	sd := RuntimeDirPath()
	if fc.Escalation.SocketDir != nil {
		sd = *fc.Escalation.SocketDir
	}
	cfg.Escalation.SocketDir = v.globalPath(keyPath{"escalation", "socket_dir"}, sd)
	for i, s := range fc.Escalation.AutoApprove {
		key := keyPath{"escalation", "auto_approve"}.index(i)
		argv, err := parseAutoApprove(s)
		if err != nil {
			v.fail(key, err)
			continue
		}
		cfg.Escalation.AutoApprove = append(cfg.Escalation.AutoApprove, argv)
		if in := scriptRunner(argv); in != "" {
			e := &Error{File: v.file, Line: v.pos.lookup(key), Key: key.String(),
				Msg: fmt.Sprintf("%s runs what the workspace's %s says; in direct mode the agent edits it", quoteValue(s), in)}
			cfg.Escalation.RunnerWarnings = append(cfg.Escalation.RunnerWarnings, e.Error())
		}
	}

	v.pending(fc, cfg)
	v.sessionTable(fc, cfg)
	v.notifyTable(fc, cfg)
	v.policyTable(fc, cfg)
	v.attemptsTable(fc, cfg)
	v.secretsTable(fc, cfg)
	guard := newHostGuard(cfg.DataRoot, v.file)
	names := make([]string, 0, len(fc.Profiles))
	for name := range fc.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := v.profile(cfg, guard, name, fc.Profiles[name])
		if p != nil {
			cfg.Profiles[name] = p
		}
	}
	if _, ok := fc.Profiles[DefaultProfileName]; !ok {
		cfg.Profiles[DefaultProfileName] = &Profile{
			Name:           DefaultProfileName,
			Image:          DefaultImage,
			PersistentDirs: slices.Clone(DefaultPersistentDirs),
			AllowEgress:    slices.Clone(cfg.Network.AllowEgress),
			AllowDomains:   slices.Clone(cfg.Network.AllowDomains),
			Env:            map[string]string{},
			Persist:        PersistProfile,
			CABundle:       cfg.CABundle,
			Resources:      cfg.Resources,
			guard:          guard,
		}
	}
	return cfg
}

// globalPath expands and canonicalizes data_root or socket_dir: no tokens
// (they are not per-profile), no "..", not the host root or a kernel
// filesystem.
func (v *validator) globalPath(key keyPath, s string) string {
	var p string
	var err error
	if strings.ContainsAny(s, "{}") {
		err = ruleErrf("tokens are not allowed here")
	} else {
		p, err = expandString(s, func(string) string { return "" })
	}
	if err == nil {
		p, err = canonicalizeChecked(p)
	}
	if err == nil {
		err = checkSystemPath(p)
	}
	if err != nil {
		v.fail(key, err)
		return ""
	}
	return p
}

func (v *validator) network(fc *fileConfig, cfg *Config) {
	cfg.Network.AllowEgress = v.cidrs(keyPath{"network", "allow_egress"}, fc.Network.AllowEgress, nil)
	cfg.Network.AllowDomains = v.domains(keyPath{"network", "allow_domains"}, fc.Network.AllowDomains, nil)
}

// cidrs parses entries and appends them to base, without duplicates.
func (v *validator) cidrs(key keyPath, entries []string, base []netip.Prefix) []netip.Prefix {
	out := slices.Clone(base)
	for i, s := range entries {
		p, err := parseCIDR(s)
		if err != nil {
			v.fail(key.index(i), err)
			continue
		}
		if HostBitsSet(s, p) {
			v.warn(key.index(i), fmt.Sprintf("%s has host bits set: it opens %s", quoteValue(s), p))
		}
		if Broad(p) {
			v.warn(key.index(i), fmt.Sprintf("%s allows %s (shorter than %s, the breadth bound)", p, Breadth(p), BroadBound(p)))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (v *validator) domains(key keyPath, entries []string, base []string) []string {
	out := slices.Clone(base)
	for i, s := range entries {
		if err := checkDomainName(s); err != nil {
			v.fail(key.index(i), err)
			continue
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (v *validator) profile(cfg *Config, guard *hostGuard, name string, fp *fileProfile) *Profile {
	key := keyPath{"profiles", name}
	if err := ValidProfileName(name); err != nil {
		v.fail(key, err)
		return nil
	}
	if fp == nil {
		fp = &fileProfile{}
	}
	p := &Profile{Name: name, Env: map[string]string{}, guard: guard, file: v.file}
	v.agentKeys(cfg, p, key, fp)

	v.profileImage(p, key, fp)
	v.persistentDirs(p, key, fp)
	p.AllowEgress = v.cidrs(key.child("allow_egress"), fp.AllowEgress, cfg.Network.AllowEgress)
	p.AllowDomains = v.domains(key.child("allow_domains"), fp.AllowDomains, cfg.Network.AllowDomains)

	v.profileEnv(p, key, fp)
	if fp.WarmPool != nil {
		n := v.warmPool(key.child("warm_pool"), fp.WarmPool, 0)
		p.WarmPool = &n
		v.warmPoolState(p, key)
	}
	v.profileSecrets(cfg, p, key, fp.Secrets)

	if fp.GitMode != nil {
		switch *fp.GitMode {
		case "branch", "direct":
			p.GitMode = *fp.GitMode
		default:
			v.fail(key.child("git_mode"), ruleErrf("invalid git_mode %s: want \"branch\" or \"direct\"", quoteValue(*fp.GitMode)))
		}
	}
	if fp.WithChanges != nil {
		p.WithChanges = *fp.WithChanges
	}
	p.Resources = v.resources(key, fileResources{Memory: fp.Memory, CPUs: fp.CPUs, Pids: fp.Pids,
		DiskReserve: fp.DiskReserve, Limits: fp.Limits}, cfg.Resources)

	for i, vol := range fp.Volumes {
		vk := key.child("volumes").index(i)
		if v.volume(p, vk, vol, cfg.DataRoot) {
			p.Volumes = append(p.Volumes, Volume(vol))
			p.volumeLines = append(p.volumeLines, v.pos.lookup(vk))
		}
	}
	v.packageState(p, key, fp)
	return p
}

// profileImage sets p's image: the profile's (checked, a warning when
// not pinned), else the default image for the default profile.
func (v *validator) profileImage(p *Profile, key keyPath, fp *fileProfile) {
	switch {
	case fp.Image != nil:
		p.Image = *fp.Image
		pinned, err := checkImage(p.Image)
		if err != nil {
			v.fail(key.child("image"), err)
		} else if !pinned {
			v.warn(key.child("image"), fmt.Sprintf("image %s is not pinned (no tag, or :latest): pin a tag or an @sha256: digest", quoteValue(p.Image)))
		}
	case p.Name == DefaultProfileName:
		p.Image = DefaultImage
	default:
		v.fail(key.child("image"), ruleErrf("missing: every profile except default needs an image"))
	}
}

// persistentDirs sets p's persistent dirs (the defaults when unset),
// dropping each that is invalid or overlaps an earlier one.
func (v *validator) persistentDirs(p *Profile, key keyPath, fp *fileProfile) {
	dirs := DefaultPersistentDirs
	switch {
	case fp.PersistentDirs != nil:
		dirs = *fp.PersistentDirs
	case fp.PersistPackageDB != nil && !*fp.PersistPackageDB:
		// The default is /usr with its package database; without it,
		// /usr alone.
		dirs = DefaultPersistentDirs[:1]
	}
	pdKey := key.child("persistent_dirs")
	for i, d := range dirs {
		if err := checkPersistentDir(d); err != nil {
			v.fail(pdKey.index(i), err)
			continue
		}
		bad := false
		for _, prev := range p.PersistentDirs {
			if err := checkPersistentPair(prev, d); err != nil {
				v.fail(pdKey.index(i), err)
				bad = true
				break
			}
		}
		if !bad {
			p.PersistentDirs = append(p.PersistentDirs, d)
		}
	}
}

// profileEnv resolves p's environment; a variable whose source is unset
// is kept as an error that only a start reports.
func (v *validator) profileEnv(p *Profile, key keyPath, fp *fileProfile) {
	envNames := make([]string, 0, len(fp.Env))
	for n := range fp.Env {
		envNames = append(envNames, n)
	}
	sort.Strings(envNames)
	for _, n := range envNames {
		ek := key.child("env").child(n)
		if err := checkEnvName(n); err != nil {
			v.fail(ek, err)
			continue
		}
		val, err := resolveEnvValue(fp.Env[n], v.lookupEnv)
		var unset *unsetEnvError
		if errors.As(err, &unset) {
			p.envErrs = append(p.envErrs, &Error{File: v.file, Line: v.pos.lookup(ek), Key: ek.String(), Msg: unset.Error()})
			continue
		}
		if err != nil {
			v.fail(ek, err)
			continue
		}
		p.Env[n] = val
		if strings.HasPrefix(fp.Env[n], "env:") {
			p.EnvFromHost = append(p.EnvFromHost, n)
		}
	}
}

// volume checks one volume at load time: token syntax, "..", the mode,
// the container path; and, when the host path does not depend on the
// domain, its canonical form against the host guard. ResolveVolumes
// repeats the path checks for the concrete domain.
func (v *validator) volume(p *Profile, key keyPath, vol fileVolume, dataRoot string) bool {
	ok := true
	if vol.Host == "" {
		v.fail(key.child("host"), ruleErrf("missing"))
		ok = false
	} else {
		// Placeholders stand in for the domain tokens: only syntax and
		// ".." can be judged without a workspace.
		root := dataRoot
		if root == "" { // data_root itself is invalid (already reported)
			root = "/data-root"
		}
		t := Tokens{ProfileName: p.Name, DataRoot: root, DomainHash: "000000000000", WorkspaceDir: "/nonexistent-workspace"}
		host, err := expandString(vol.Host, t.value)
		if err == nil && !hasDomainToken(vol.Host) && dataRoot != "" {
			if host, err = canonicalizeChecked(host); err == nil {
				err = p.guard.checkMountSource(host)
			}
		}
		if err != nil {
			v.fail(key.child("host"), err)
			ok = false
		}
	}
	if vol.Container == "" {
		v.fail(key.child("container"), ruleErrf("missing"))
		ok = false
	} else if err := checkContainerPath(vol.Container); err != nil {
		v.fail(key.child("container"), err)
		ok = false
	} else {
		for _, d := range p.PersistentDirs {
			if d == vol.Container {
				v.fail(key.child("container"), ruleErrf("%s is also a persistent_dirs entry", quoteValue(d)))
				ok = false
			}
		}
		for _, prev := range p.Volumes {
			if prev.Container == vol.Container {
				v.fail(key.child("container"), ruleErrf("%s is mounted twice", quoteValue(vol.Container)))
				ok = false
			}
		}
	}
	if _, _, err := parseMode(vol.Mode); err != nil {
		v.fail(key.child("mode"), err)
		ok = false
	}
	return ok
}
