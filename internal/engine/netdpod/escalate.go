package netdpod

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// The escalation client in a cluster pod. The netd image carries the C
// front end (also each session's holder) and the Go client
// (netdimage); an init container of that image copies them into an
// emptyDir that the agent container mounts read-only at escrelay.BinDir,
// directly below "/" (a mount point cannot be renamed; its parents
// could). The agent, root in its container without
// CAP_SYS_ADMIN, can neither change them nor remount the volume: a
// later human session's holder is lazaret's, not a program of the
// agent's that would receive that session's delegation.
const (
	InstallerName  = "lazaret-escalate-install"
	EscalateVolume = "lazaret-escalate-bin"
	installerDir   = "/out"
)

func (s *Spec) addEscalation(o Options) {
	s.Volumes = append(s.Volumes, corev1.Volume{Name: EscalateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("32Mi")),
	}}})
	s.AgentVolumeMounts = append(s.AgentVolumeMounts, corev1.VolumeMount{Name: EscalateVolume, MountPath: escrelay.BinDir, ReadOnly: true})
	s.InitContainers = append(s.InitContainers, corev1.Container{
		Name:            InstallerName,
		Image:           o.Image,
		ImagePullPolicy: o.PullPolicy,
		Command:         []string{"/" + escrelay.InstallerBinary, escrelay.InstallVerb, installerDir},
		VolumeMounts:    []corev1.VolumeMount{{Name: EscalateVolume, MountPath: installerDir}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext:          SecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
}
