package clicore

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUnknownCommandAliasesAndHidden: a typo of an alias suggests the
// command's name; a hidden command is never suggested, even when typed
// nearly right (control: the same name visible is suggested).
func TestUnknownCommandAliasesAndHidden(t *testing.T) {
	root := &cobra.Command{Use: "lazaret"}
	root.AddCommand(
		&cobra.Command{Use: "status", Aliases: []string{"st"}, Run: func(*cobra.Command, []string) {}},
		&cobra.Command{Use: "remove", Aliases: []string{"delete"}, Run: func(*cobra.Command, []string) {}},
		&cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}},
	)
	for typed, want := range map[string]string{
		"stauts": "did you mean status?",
		"delte":  "did you mean remove?",
		"secrte": "",
	} {
		err := UnknownCommand(root, typed)
		if _, ok := err.(UsageError); !ok {
			t.Fatalf("%s: %T is not a usage error", typed, err)
		}
		if got := err.Error(); (want == "") != !strings.Contains(got, "did you mean") || (want != "" && !strings.HasSuffix(got, want)) {
			t.Errorf("%s: %q, want %q", typed, got, want)
		}
	}
	for _, c := range root.Commands() {
		c.Hidden = false
	}
	if err := UnknownCommand(root, "secrte"); !strings.HasSuffix(err.Error(), "did you mean secret?") {
		t.Errorf("control: visible command not suggested: %v", err)
	}
}
