// Package kube is the only package that talks to a Kubernetes API server
// (client-go): the typed clientset for pods, namespaces, RuntimeClasses,
// NetworkPolicies, ConfigMaps and Leases, the dynamic client for
// agent-sandbox's resources (converted to kubespec's structs), and exec
// into a pod with a terminal, resize and exit codes. Errors are mapped
// once to the sentinels of errors.go.
package kube

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client is one namespace of one cluster.
type Client struct {
	Core      kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
	// Host is the API server's URL (shown by doctor).
	Host string
	// Exec runs commands in pods; Connect sets the API server's, tests
	// their own.
	Exec Executor
}

// Options select the cluster: empty fields take client-go's defaults
// ($KUBECONFIG or ~/.kube/config, its current context, the context's
// namespace, else "default").
type Options struct {
	Kubeconfig string
	Context    string
	Namespace  string
}

// Connect loads the kubeconfig and builds the clients. It does not talk
// to the cluster yet.
func Connect(o Options) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	return New(cfg, ns)
}

// New builds the clients of cfg for namespace ns.
func New(cfg *rest.Config, ns string) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "lazaret-kube"
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Client{Core: core, Dynamic: dyn, Namespace: ns, Host: cfg.Host, Exec: &apiExecutor{cfg: cfg, core: core}}, nil
}
