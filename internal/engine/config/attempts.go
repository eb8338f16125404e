package config

// Attempts is the [attempts] section: how many parallel attempts
// (`lazaret fork`) a workspace may have of one profile at once. Each is a
// sandbox of its own with a copy of the profile's persistent dirs, so the
// bound is the user's guard against one mistyped -n filling the disk.
type Attempts struct {
	Max int
}

// DefaultMaxAttempts bounds a workspace's attempts of one profile.
const DefaultMaxAttempts = 8

// maxMaxAttempts is the most [attempts] max may say.
const maxMaxAttempts = 64

type fileAttempts struct {
	Max *int64 `toml:"max"`
}

// attemptsTable reads [attempts].
func (v *validator) attemptsTable(fc *fileConfig, cfg *Config) {
	cfg.Attempts = Attempts{Max: DefaultMaxAttempts}
	if f := fc.Attempts.Max; f != nil {
		if *f < 1 || *f > maxMaxAttempts {
			v.fail(keyPath{"attempts", "max"}, ruleErrf("invalid max %d: want 1 to %d attempts of a profile per workspace", *f, maxMaxAttempts))
			return
		}
		cfg.Attempts.Max = int(*f)
	}
}
