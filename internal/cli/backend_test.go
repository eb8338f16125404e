package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitBackend(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	cases := []struct {
		args    []string
		env     string
		backend string
		rest    []string
	}{
		{[]string{"exec", "--", "ls"}, "", "podman", []string{"exec", "--", "ls"}},
		{[]string{"--backend", "kubernetes", "exec", "--", "cat", "/proc/version"}, "", "kubernetes", []string{"exec", "--", "cat", "/proc/version"}},
		{[]string{"--backend=kubernetes", "-v", "shell", "dev"}, "", "kubernetes", []string{"-v", "shell", "dev"}},
		{[]string{"--config", "--backend", "status"}, "", "podman", []string{"--config", "--backend", "status"}},
		{[]string{"status", "dev", "--backend", "kubernetes"}, "", "kubernetes", []string{"status", "dev"}},
		{[]string{"exec", "ls", "--backend", "kubernetes"}, "", "podman", []string{"exec", "ls", "--backend", "kubernetes"}},
		{[]string{"exec", "--", "x", "--backend", "kubernetes"}, "", "podman", []string{"exec", "--", "x", "--backend", "kubernetes"}},
		{[]string{"ps"}, "kubernetes", "kubernetes", []string{"ps"}},
		{[]string{"--backend", "podman", "ps"}, "kubernetes", "podman", []string{"ps"}},
	}
	for _, c := range cases {
		b, rest, err := splitBackend(c.args, env(c.env))
		if err != nil || b != c.backend || !slices.Equal(rest, c.rest) {
			t.Errorf("splitBackend(%q, env %q) = %q, %q, %v; want %q, %q", c.args, c.env, b, rest, err, c.backend, c.rest)
		}
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--backend", "k8s", "ps"}, "", `--backend: unknown backend "k8s"`},
		{[]string{"ps"}, "docker", `LAZARET_BACKEND: unknown backend "docker"`},
		{[]string{"--backend"}, "", "--backend: needs a value"},
	} {
		_, _, err := splitBackend(c.args, env(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("splitBackend(%q, env %q): err %v, want %q", c.args, c.env, err, c.want)
		}
	}
}
