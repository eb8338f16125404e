package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/suggest"
)

// Secret is one [secrets.NAME] table: a credential that never enters the
// sandbox. netd injects it into requests to Hosts (docs/SECRETS.md).
type Secret struct {
	Name  string
	Hosts []string
	// Header, when set, is set to Format ("{value}" by default) on every
	// request to Hosts and is the only place the value goes; without it
	// the placeholder is replaced in secret.DefaultHeaders only.
	Header string
	Format string
	// Exactly one source: Env (a host variable), File (a 0600 file of the
	// user's) or Command (its stdout; run again every Refresh if set).
	Env     string
	File    string
	Command []string
	Refresh time.Duration

	file    string
	line    int
	srcKey  keyPath
	srcLine int
}

// Locate returns err as an *Error at the secret's value source key.
func (s *Secret) Locate(err error) error {
	return &Error{File: s.file, Line: s.srcLine, Key: s.srcKey.String(), Msg: err.Error()}
}

// ProfileSecret is a secret a profile uses and the variable under which
// the agent sees its placeholder.
type ProfileSecret struct {
	Secret *Secret
	EnvVar string
}

type fileSecret struct {
	Value   *string  `toml:"value"`
	Command []string `toml:"command"`
	Refresh *string  `toml:"refresh"`
	Hosts   []string `toml:"hosts"`
	Header  *string  `toml:"header"`
	Format  *string  `toml:"format"`
}

var secretNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// minRefresh bounds how often a command is run again.
const minRefresh = 10 * time.Second

// secretsTable validates every [secrets.NAME] table.
func (v *validator) secretsTable(fc *fileConfig, cfg *Config) {
	cfg.Secrets = map[string]*Secret{}
	names := make([]string, 0, len(fc.Secrets))
	for n := range fc.Secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if s := v.secret(n, fc.Secrets[n]); s != nil {
			cfg.Secrets[n] = s
		}
	}
}

func (v *validator) secret(name string, fs *fileSecret) *Secret {
	key := keyPath{"secrets", name}
	if !secretNameRE.MatchString(name) {
		v.fail(key, ruleErrf("invalid secret name %s: must match ^[a-z0-9_-]{1,32}$", quoteValue(name)))
		return nil
	}
	if fs == nil {
		fs = &fileSecret{}
	}
	s := &Secret{Name: name, file: v.file, line: v.pos.lookup(key)}
	ok := v.secretSource(key, fs, s)
	if len(fs.Hosts) == 0 {
		v.fail(key.child("hosts"), ruleErrf("missing: a secret needs the hosts it may be sent to"))
		ok = false
	}
	for i, h := range fs.Hosts {
		if err := secret.CheckHostPattern(h); err != nil {
			v.fail(key.child("hosts").index(i), ruleErrf("%v", err))
			ok = false
			continue
		}
		s.Hosts = append(s.Hosts, h)
	}
	if fs.Header != nil {
		s.Header = *fs.Header
		if (secret.Secret{Name: name, Header: s.Header, Hosts: []string{"x.y"}, Placeholder: strings.Repeat("x", 16), Value: "x"}).Validate() != nil {
			v.fail(key.child("header"), ruleErrf("invalid header name %s", quoteValue(s.Header)))
			ok = false
		}
	}
	if fs.Format != nil {
		s.Format = *fs.Format
		switch {
		case fs.Header == nil:
			v.fail(key.child("format"), ruleErrf("format needs header (the header it formats)"))
			ok = false
		case strings.Count(s.Format, "{value}") != 1 || strings.ContainsAny(s.Format, "\r\n\x00"):
			v.fail(key.child("format"), ruleErrf("format must contain {value} once and no line break, e.g. \"Bearer {value}\""))
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return s
}

// secretSource reads value (env:VAR or file:PATH) or command, and refresh.
func (v *validator) secretSource(key keyPath, fs *fileSecret, s *Secret) bool {
	switch {
	case fs.Value != nil && fs.Command != nil:
		v.fail(key.child("command"), ruleErrf("set value or command, not both"))
		return false
	case fs.Value == nil && len(fs.Command) == 0:
		v.fail(key.child("value"), ruleErrf("missing: value = \"env:VAR\" or \"file:PATH\", or command = [...]"))
		return false
	}
	if fs.Refresh != nil {
		d, err := time.ParseDuration(*fs.Refresh)
		switch {
		case fs.Command == nil:
			v.fail(key.child("refresh"), ruleErrf("refresh is for a command source"))
			return false
		case err != nil || d < minRefresh:
			v.fail(key.child("refresh"), ruleErrf("invalid refresh %s: want a duration of at least %v, e.g. \"50m\"", quoteValue(*fs.Refresh), minRefresh))
			return false
		}
		s.Refresh = d
	}
	if fs.Command != nil {
		s.srcKey = key.child("command")
		s.srcLine = v.pos.lookup(s.srcKey)
		if len(fs.Command) == 0 || fs.Command[0] == "" {
			v.fail(s.srcKey, ruleErrf("empty command"))
			return false
		}
		s.Command = fs.Command
		return true
	}
	s.srcKey = key.child("value")
	s.srcLine = v.pos.lookup(s.srcKey)
	if name, ok := strings.CutPrefix(*fs.Value, "env:"); ok && envNameRE.MatchString(name) {
		s.Env = name
		return true
	}
	if p, ok := strings.CutPrefix(*fs.Value, "file:"); ok && p != "" && !strings.ContainsAny(p, "{}") {
		exp, err := expandString(p, func(string) string { return "" })
		if err == nil {
			exp, err = canonicalizeChecked(exp)
		}
		if err != nil {
			v.fail(s.srcKey, err)
			return false
		}
		s.File = exp
		return true
	}
	v.fail(s.srcKey, ruleErrf("invalid value %s: want \"env:VAR\" or \"file:PATH\" (the value itself never goes in the configuration)", quoteValue(*fs.Value)))
	return false
}

// profileSecrets checks a profile's secrets = { NAME = "ENV_VAR" }: known
// secrets, valid variables not also in env, and every host of the secret
// inside the profile's allow_domains.
func (v *validator) profileSecrets(cfg *Config, p *Profile, key keyPath, m map[string]string) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	known := make([]string, 0, len(cfg.Secrets))
	for n := range cfg.Secrets {
		known = append(known, n)
	}
	sort.Strings(known)
	for _, n := range names {
		sk := key.child("secrets").child(n)
		s, ok := cfg.Secrets[n]
		if !ok {
			v.fail(sk, ruleErrf("unknown secret %s: no [secrets.%s] table%s", quoteValue(n), n, suggest.Hint(n, known)))
			continue
		}
		ev := m[n]
		if err := checkEnvName(ev); err != nil {
			v.fail(sk, err)
			continue
		}
		if _, dup := p.Env[ev]; dup {
			v.fail(sk, ruleErrf("%s is also set in env: the agent gets the placeholder there", ev))
			continue
		}
		bad := false
		for _, h := range s.Hosts {
			if !domainsCover(p.AllowDomains, h) {
				v.fail(sk, ruleErrf("host %s of secret %s is not in the profile's allow_domains", quoteValue(h), n))
				bad = true
			}
		}
		if !bad {
			p.Secrets = append(p.Secrets, ProfileSecret{Secret: s, EnvVar: ev})
		}
	}
}

// domainsCover reports whether an allow_domains entry admits every name
// host (a secret's exact name or *.suffix) stands for.
func domainsCover(domains []string, host string) bool {
	for _, d := range domains {
		if d == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(d, "*."); ok && strings.HasSuffix(strings.TrimPrefix(host, "*."), "."+suffix) {
			return true
		}
	}
	return false
}

// CheckSecrets reports the secrets of p whose source cannot give a value
// now: an unset variable, a file that is not the user's own 0600 regular
// file, a command not found. Commands that start a sandbox call it (the
// value itself is read by the coordinator).
func (p *Profile) CheckSecrets() []*Error {
	var errs []*Error
	for _, ps := range p.Secrets {
		if err := ps.Secret.check(); err != nil {
			errs = append(errs, ps.Secret.Locate(err).(*Error))
		}
	}
	return errs
}

func (s *Secret) check() error {
	switch {
	case s.Env != "":
		if _, ok := os.LookupEnv(s.Env); !ok {
			return fmt.Errorf("host variable %s is not set", s.Env)
		}
	case s.File != "":
		return s.checkFile()
	default:
		if _, err := exec.LookPath(s.Command[0]); err != nil {
			return fmt.Errorf("command %s: %w", quoteValue(s.Command[0]), errors.Unwrap(err))
		}
	}
	return nil
}

// MaxSecretSize bounds a value read from a file or a command.
const MaxSecretSize = 64 << 10

// checkFile checks the secret file without reading it: a regular file of
// the user's with no permission for group or others, at most
// MaxSecretSize. secretfetch checks it again on the file it opens.
func (s *Secret) checkFile() error {
	fi, err := os.Stat(s.File)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot read %s: %w", quoteValue(s.File), err)
	}
	return CheckSecretFile(s.File, fi)
}

// CheckSecretFile is the rule for a secret file's metadata: a regular file
// of the user's with no permission for group or others, at most
// MaxSecretSize bytes.
func CheckSecretFile(name string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s must be a regular file of mode 0600 (it is %v)", quoteValue(name), fi.Mode())
	}
	if err := checkFileOwner(fi); err != nil {
		return err
	}
	if fi.Size() > MaxSecretSize {
		return fmt.Errorf("%s is larger than %d bytes", quoteValue(name), MaxSecretSize)
	}
	return nil
}
