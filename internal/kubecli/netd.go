package kubecli

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/engine/netdimage"
	"github.com/lazaret-dev/lazaret/internal/engine/netdpod"
	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
)

// The cluster DNS Service netd forwards to when [cluster].dns is unset.
const (
	clusterDNSNamespace = "kube-system"
	clusterDNSService   = "kube-dns"
)

// networkSidecar is the pod's lazaret-netd (the DNS allowlist resolver,
// pod mode): its image is [cluster].netd_image, else this build's
// localhost/lazaret-netd:<version>; it forwards allowed names to
// [cluster].dns, else to the cluster's kube-dns Service. With secrets it
// injects them: their values and the CA key in the Secret beside its
// ConfigMap, mounted into netd only.
func (g *globals) networkSidecar(ctx context.Context, cfg *config.Config, c *kube.Client, secrets *podSecrets) (kubespec.SidecarFunc, error) {
	image := cfg.Cluster.NetdImage
	if image == "" {
		image = netdimage.ImageRef()
	}
	ups := cfg.Cluster.DNS
	if len(ups) == 0 {
		var err error
		ups, err = c.ServiceAddrs(ctx, clusterDNSNamespace, clusterDNSService, corev1.ProtocolUDP)
		if errors.Is(err, kube.ErrNotFound) || (err == nil && len(ups) == 0) {
			return nil, setupError{fmt.Errorf("no resolver for the network sidecar: [cluster] dns is unset and service %s/%s has no address", clusterDNSNamespace, clusterDNSService),
				"set `dns = [\"<cluster DNS IP>\"]` under [cluster] in the configuration"}
		}
		if err != nil {
			return nil, err
		}
	}
	pull := corev1.PullPolicy(cfg.Cluster.ImagePullPolicy)
	return func(pol netpolicy.Policy, configMap string) (*kubespec.Sidecar, error) {
		o := netdpod.Options{Image: image, PullPolicy: pull, Policy: pol, Upstreams: ups, Name: configMap, Client: true}
		var labels map[string]string
		if secrets != nil {
			secrets.options(&o)
			labels = map[string]string{labelSecretsConfig: secrets.config}
		}
		spec, err := netdpod.Sidecar(o)
		if err != nil {
			return nil, err
		}
		return &kubespec.Sidecar{Container: spec.Container, ConfigMapData: spec.ConfigMapData, Volumes: spec.Volumes,
			DNSPolicy: spec.DNSPolicy, DNSConfig: spec.DNSConfig, Upstreams: ups,
			SecretName: netdpod.SecretName(configMap), SecretData: spec.SecretData,
			AgentEnv: spec.AgentEnv, AgentVolumeMounts: spec.AgentVolumeMounts, Labels: labels, InitContainers: spec.InitContainers}, nil
	}, nil
}
