package config

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

const testPEM = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"

func TestPersistKey(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[profiles.aa]\nimage = \"x:1\"\n[profiles.bb]\nimage = \"x:1\"\npersist = \"workspace\"\n")
	if c.Profiles["aa"].Persist != PersistProfile || c.Profiles["bb"].Persist != PersistWorkspace || c.Profiles[DefaultProfileName].Persist != PersistProfile {
		t.Errorf("persist: aa=%q bb=%q default=%q", c.Profiles["aa"].Persist, c.Profiles["bb"].Persist, c.Profiles[DefaultProfileName].Persist)
	}
	wantErr(t, "[profiles.aa]\nimage = \"x:1\"\npersist = \"domain\"\n", "profiles.aa.persist", `invalid persist "domain"`, false)
	wantErr(t, "[profiles.aa]\nimage = \"x:1\"\npersist = 1\n", "profiles.aa.persist", "want a string", false)
}

func TestCABundleKeys(t *testing.T) {
	root := testEnv(t)
	good := filepath.Join(root, "home", "corp.pem")
	if err := os.WriteFile(good, []byte(testPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, "[profiles.aa]\nimage = \"x:1\"\n")
	if got := c.Profiles["aa"].CABundle; got.Path != DefaultCABundle || got.Explicit {
		t.Errorf("default = %+v", got)
	}
	c = mustParse(t, fmt.Sprintf("ca_bundle = %q\n[profiles.aa]\nimage = \"x:1\"\n[profiles.bb]\nimage = \"x:1\"\nca_bundle = \"\"\n", good))
	if got := c.Profiles["aa"].CABundle; got.Path != good || !got.Explicit || got.Line != 1 || got.Key != "ca_bundle" {
		t.Errorf("global = %+v", got)
	}
	if got := c.Profiles[DefaultProfileName].CABundle; got.Path != good {
		t.Errorf("default profile = %+v", got)
	}
	if got := c.Profiles["bb"].CABundle; got.Path != "" || !got.Explicit {
		t.Errorf("disabled = %+v", got)
	}
	c = mustParse(t, "[profiles.aa]\nimage = \"x:1\"\nca_bundle = \"~/corp.pem\"\n")
	if got := c.Profiles["aa"].CABundle; got.Path != good || got.Line != 3 || got.Key != "profiles.aa.ca_bundle" {
		t.Errorf("profile = %+v", got)
	}

	notPEM := filepath.Join(root, "home", "notes.txt")
	key := filepath.Join(root, "home", "key.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(testPEM+"-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(root, "home", "unreadable.pem")
	if err := os.WriteFile(unreadable, []byte(testPEM), 0o000); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ value, msg string }{
		{filepath.Join(root, "home", "missing.pem"), "no such file"},
		{filepath.Join(root, "home"), "not a regular file"},
		{notPEM, "no PEM CERTIFICATE block"},
		{key, "contains a private key"},
		{"{profile_dir}/ca.pem", "tokens are not allowed"},
	} {
		wantErr(t, fmt.Sprintf("[profiles.aa]\nimage = \"x:1\"\nca_bundle = %q\n", tc.value), "profiles.aa.ca_bundle", tc.msg, false)
	}
	if os.Getuid() != 0 {
		wantErr(t, fmt.Sprintf("ca_bundle = %q\n", unreadable), "ca_bundle", "permission denied", false)
	}
	wantErr(t, "ca_bundle = \"/proc/self/environ\"\n", "ca_bundle", "is under /proc", true)
}

func TestProfileOverlayIsNoMountSource(t *testing.T) {
	root := testEnv(t)
	data := filepath.Join(root, "data", "lazaret")
	for _, host := range []string{"{profile_dir}", "{profile_dir}/overlay", "{profile_dir}/overlay/usr", data + "/other/overlay", data + "/other"} {
		wantErr(t, fmt.Sprintf("[profiles.aa]\nimage = \"x:1\"\nvolumes = [{ host = %q, container = \"/x\" }]\n", host),
			"profiles.aa.volumes[0].host", "a profile's State Anchor", true)
	}
	for _, ok := range []string{"{profile_dir}/home", data + "/aa/cache"} {
		mustParse(t, fmt.Sprintf("[profiles.aa]\nimage = \"x:1\"\nvolumes = [{ host = %q, container = \"/x\" }]\n", ok))
	}
}

func TestImageLocation(t *testing.T) {
	testEnv(t)
	c := mustParse(t, "[profiles.aa]\n\nimage = \"x:1\"\n")
	if f, l := c.Profiles["aa"].ImageLocation(); f != "test.toml" || l != 3 {
		t.Errorf("ImageLocation = %q, %d", f, l)
	}
}
