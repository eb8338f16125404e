package netd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// maxPodSecretFile bounds every file LoadPodSecrets reads (a value is at
// most 64 KiB; a trust store a few hundred).
const maxPodSecretFile = 1 << 20

// LoadPodSecrets builds, in pod mode, what the coordinator sends locally
// with OpSecrets: the secrets' hosts and placeholders from secretsFile
// (the ConfigMap's PodSecretsFile, no values), the CA certificate and the
// upstream roots beside it, the values and the CA key from secretDir (the
// Secret, mounted into netd's container only). Errors name the file and
// never carry a value.
func LoadPodSecrets(secretsFile, secretDir string) (netdapi.Request, error) {
	cfgDir := filepath.Dir(secretsFile)
	b, err := readSmall(secretsFile)
	if err != nil {
		return netdapi.Request{}, err
	}
	var ss []secret.Secret
	if err := decodeStrict(b, &ss); err != nil {
		return netdapi.Request{}, fmt.Errorf("secrets file %s: %w", secretsFile, err)
	}
	req := netdapi.Request{Version: netdapi.Version, Op: netdapi.OpSecrets, Secrets: ss}
	for i := range req.Secrets {
		s := &req.Secrets[i]
		if s.Value != "" {
			return netdapi.Request{}, fmt.Errorf("secrets file %s: key [%d].value: values belong in the Secret, not the ConfigMap", secretsFile, i)
		}
		name, err := netdapi.PodSecretValueFile(s.Name)
		if err != nil {
			return netdapi.Request{}, fmt.Errorf("secrets file %s: key [%d].name: %w", secretsFile, i, err)
		}
		v, err := readSmall(filepath.Join(secretDir, name))
		if err != nil {
			return netdapi.Request{}, err
		}
		s.Value = strings.TrimSuffix(string(v), "\n") // as a file: source locally
		if err := s.Validate(); err != nil {
			return netdapi.Request{}, fmt.Errorf("secrets file %s: key [%d]: %w", secretsFile, i, err)
		}
	}
	if req.CACert, err = readSmall(filepath.Join(cfgDir, netdapi.PodCACertFile)); err != nil {
		return netdapi.Request{}, err
	}
	if req.Roots, err = readSmall(filepath.Join(cfgDir, netdapi.PodRootsFile)); err != nil {
		return netdapi.Request{}, err
	}
	if req.CAKey, err = readSmall(filepath.Join(secretDir, netdapi.PodCAKeyFile)); err != nil {
		return netdapi.Request{}, err
	}
	return req, nil
}

// readSmall reads a file of at most maxPodSecretFile bytes; its error
// names the file only.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError: names the file
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPodSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxPodSecretFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPodSecretFile)
	}
	return b, nil
}

// PodSecretPoll is how often a pod-mode netd re-reads the mounted Secret:
// the kubelet swaps a Secret volume's files in place when the Secret
// changes (lazaret-kube writes each start's freshly fetched values), so a
// running sandbox gets a refreshed token without a restart.
const PodSecretPoll = 15 * time.Second

// WatchPodSecrets re-reads the values of names from secretDir every
// interval until ctx ends, and hands each changed one to the injector.
// Values are compared in memory and never logged.
func (d *Daemon) WatchPodSecrets(ctx context.Context, secretDir string, names []string, interval time.Duration) {
	last := map[string]string{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		p := d.proxy
		d.mu.Unlock()
		if p == nil {
			continue
		}
		for _, name := range refreshPodSecrets(secretDir, names, last, p.SetValue) {
			d.logChange("secret " + name + ": value refreshed from the mounted Secret")
		}
	}
}

// refreshPodSecrets reads each value file of names in secretDir and calls
// set for the ones that differ from last (the first read of each only
// records it: the injector started with it). It returns the names set.
// A file that cannot be read, or a value set refuses, keeps the old value.
func refreshPodSecrets(secretDir string, names []string, last map[string]string, set func(name, value string) error) []string {
	var changed []string
	for _, name := range names {
		file, err := netdapi.PodSecretValueFile(name)
		if err != nil {
			continue
		}
		b, err := readSmall(filepath.Join(secretDir, file))
		if err != nil {
			continue
		}
		v := strings.TrimSuffix(string(b), "\n")
		prev, seen := last[name]
		if seen && prev == v {
			continue
		}
		if seen {
			if err := set(name, v); err != nil {
				continue
			}
			changed = append(changed, name)
		}
		last[name] = v
	}
	return changed
}
