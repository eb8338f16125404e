package cli

import "github.com/lazaret-dev/lazaret/internal/config"

// verbLine is the lazaret command line of verb for profile, as a hint
// shows it: `lazaret stop`, or `lazaret stop claude` for another profile
// than the default (a hint naming the wrong profile would act on another
// sandbox).
func verbLine(verb, profile string) string {
	if profile == "" || profile == config.DefaultProfileName {
		return "`lazaret " + verb + "`"
	}
	return "`lazaret " + verb + " " + profile + "`"
}
