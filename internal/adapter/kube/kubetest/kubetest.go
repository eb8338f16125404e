// Package kubetest is the tests' stand-in cluster: a kube.Client on
// client-go's fake clientsets (typed and dynamic, with agent-sandbox's
// list kinds) and a scripted Executor. Tests only.
package kubetest

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
)

// ListKinds are the list kinds of agent-sandbox's resources, which the
// fake dynamic client must be told.
var ListKinds = map[schema.GroupVersionResource]string{
	kube.SandboxesGVR: "SandboxList",
	kube.TemplatesGVR: "SandboxTemplateList",
	kube.WarmPoolsGVR: "SandboxWarmPoolList",
	kube.ClaimsGVR:    "SandboxClaimList",
}

// Cluster is a fake cluster and the client on it.
type Cluster struct {
	Client  *kube.Client
	Core    *fake.Clientset
	Dynamic *dynamicfake.FakeDynamicClient
	Exec    *Executor
}

// ClusterDNS is the stand-in cluster's kube-dns Service address.
const ClusterDNS = "10.96.0.10"

// Node is the stand-in cluster's node: 100 GiB of ephemeral storage, 90
// of them allocatable (the kubelet's default eviction threshold, 10%).
var Node = &corev1.Node{
	ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
	Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("90Gi")},
	},
}

// New is a fake cluster holding core objects and, as a real cluster, the
// kube-system/kube-dns Service and a Node, with namespace ns.
func New(ns string, core ...runtime.Object) *Cluster {
	dns := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
		Spec: corev1.ServiceSpec{ClusterIP: ClusterDNS, ClusterIPs: []string{ClusterDNS},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}}},
	}
	c := &Cluster{
		Core:    fake.NewClientset(append([]runtime.Object{dns, Node.DeepCopy()}, core...)...),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), ListKinds),
		Exec:    &Executor{},
	}
	c.Client = &kube.Client{Core: c.Core, Dynamic: c.Dynamic, Namespace: ns, Host: "https://fake:6443", Exec: c.Exec}
	return c
}

// Executor records the execs and answers with Run (exit 0 when nil).
type Executor struct {
	mu    sync.Mutex
	Calls []kube.ExecRequest
	Run   func(kube.ExecRequest) (int, error)
}

// Exec implements kube.Executor.
func (x *Executor) Exec(_ context.Context, r kube.ExecRequest) (int, error) {
	x.mu.Lock()
	x.Calls = append(x.Calls, r)
	run := x.Run
	x.mu.Unlock()
	if run == nil {
		return 0, nil
	}
	return run(r)
}

// Requests are the execs so far.
func (x *Executor) Requests() []kube.ExecRequest {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]kube.ExecRequest(nil), x.Calls...)
}
