package netdapi

import (
	"fmt"
	"regexp"
)

// Pod mode (Kubernetes): what netd reads at start instead of control
// requests. internal/engine/netdpod writes these files into the pod's ConfigMap
// (no secret material) and Secret (values and the CA key, mounted into
// netd's container only); lazaret-netd --pod reads them.
const (
	// PodConfigDir holds the ConfigMap: PodPolicyFile, PodSecretsFile,
	// PodCACertFile, PodRootsFile.
	PodConfigDir = "/etc/lazaret-netd"
	// PodSecretDir holds the Secret: PodCAKeyFile and one
	// PodSecretValueFile per secret, each 0400.
	PodSecretDir = "/run/secrets/lazaret-netd"
	// PodRunDir is netd's own writable directory (an emptyDir only its
	// container mounts) holding PodControlSocket.
	PodRunDir = "/run/lazaret-netd"

	PodPolicyFile    = "policy.json"
	PodSecretsFile   = "secrets.json" // []secret.Secret without values
	PodCACertFile    = "ca.crt"       // the interception CA's certificate (PEM)
	PodCABundleFile  = "ca-bundle.crt"
	PodRootsFile     = "roots.pem" // netd's trust store for the real hosts
	PodCAKeyFile     = "ca.key"    // PKCS #8 DER
	PodControlSocket = "control.sock"
)

// secretNameRe is what a Kubernetes Secret key allows, less the dot
// PodSecretValueFile adds.
var secretNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// PodSecretValueFile is the key (and file name) of a secret's value in
// the pod's Secret.
func PodSecretValueFile(name string) (string, error) {
	if !secretNameRe.MatchString(name) {
		return "", fmt.Errorf("secret name %q: only letters, digits, '-' and '_' can name a Kubernetes Secret key", name)
	}
	return "value." + name, nil
}
