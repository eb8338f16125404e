package netdpod

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestEscalationInstaller: with Client the pod gets the installer
// (the netd image, the same hardened context), its volume, and the
// agent's mount of it at /run/lazaret/bin, read-only; without, none.
func TestEscalationInstaller(t *testing.T) {
	o := Options{Image: "localhost/lazaret-netd:test", PullPolicy: corev1.PullNever, Policy: testPolicy(t), Upstreams: upstreams, Name: "n", Client: true}
	s, err := Sidecar(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.InitContainers) != 1 {
		t.Fatalf("init containers %+v", s.InitContainers)
	}
	ic := s.InitContainers[0]
	if ic.Image != o.Image || ic.RestartPolicy != nil || *ic.SecurityContext.ReadOnlyRootFilesystem != true ||
		!slices.Equal(ic.Command, []string{"/lazaret-escalate-go", "__install", "/out"}) {
		t.Errorf("installer %+v", ic)
	}
	i := slices.IndexFunc(s.AgentVolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == EscalateVolume })
	if i < 0 || !s.AgentVolumeMounts[i].ReadOnly || s.AgentVolumeMounts[i].MountPath != "/lazaret" {
		t.Errorf("agent mounts %+v", s.AgentVolumeMounts)
	}
	if !slices.ContainsFunc(s.Volumes, func(v corev1.Volume) bool { return v.Name == EscalateVolume && v.EmptyDir != nil }) {
		t.Errorf("volumes %+v", s.Volumes)
	}
	o.Client = false
	if s, _ := Sidecar(o); len(s.InitContainers) != 0 || slices.ContainsFunc(s.AgentVolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == EscalateVolume }) {
		t.Errorf("without the client: %+v %+v", s.InitContainers, s.AgentVolumeMounts)
	}
}
