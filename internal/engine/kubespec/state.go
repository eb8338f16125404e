package kubespec

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// The State Anchor on the cluster: a profile's persistent dirs live on a
// PersistentVolumeClaim of lazaret's own (not a Sandbox's, which
// agent-sandbox deletes with it), one per scope: per profile, or per
// Domain Anchor with persist = "workspace". The pod mounts it twice: the
// seed init container sees the whole volume at StateMount and copies the
// image's dirs into it, the agent container mounts each dir's sub-path
// over the dir.
const (
	StateVolume   = "lazaret-state"
	StateMount    = "/.lazaret-state"
	SeedContainer = "lazaret-seed"
	// LabelStateScope is "profile" or "workspace" on a state PVC.
	LabelStateScope = "lazaret.dev/state-scope"
	// SeedImageEnv tells the seed script which image it copies from.
	SeedImageEnv = "LAZARET_SEED_IMAGE"
)

// State is the persistent dirs of a template and the PVC they are on.
type State struct {
	Claim string
	Dirs  []string
}

// StateInput is one State Anchor scope's PVC.
type StateInput struct {
	Profile string
	// DomainHash and Workspace are set for persist = "workspace" (one PVC
	// per Domain Anchor); empty for a profile's shared PVC.
	DomainHash, Workspace string
	StorageClass          string // empty: the cluster's default class
	Size                  string
	// Attempt, with DomainHash the attempt's, is the PVC of an attempt
	// (`lazaret fork`): a Domain Anchor's own, whatever the profile's
	// persist says, so that its persistent dirs never write the
	// profile's.
	Attempt string
	// CloneFrom, when set, makes the PVC a clone of that PVC of the
	// namespace (a dataSource: CSI volume cloning, same class).
	CloneFrom string
}

// StateName is the PVC of a scope: lazaret-state-<Domain Anchor hash> for
// a workspace's, lazaret-state-<profile>-<hash of the profile name> for a
// profile's (two profiles that differ only in '_' and '-' get two).
func StateName(profile, domainHash string) string {
	if domainHash != "" {
		return "lazaret-state-" + domainHash
	}
	h, _ := contentHash(profile) // a string always marshals
	return "lazaret-state-" + objectProfile(profile) + "-" + h
}

// StatePVC is the PVC of in's scope: ReadWriteOnce, in.Size, labelled
// like lazaret's other objects and owned by nothing, so that it outlives
// the claims and sandboxes that mount it.
func StatePVC(in StateInput) (*corev1.PersistentVolumeClaim, error) {
	size, err := resource.ParseQuantity(in.Size)
	if err != nil {
		return nil, fmt.Errorf("kubespec: state size %q: %w", in.Size, err)
	}
	labels := managedLabels(in.Profile)
	labels[LabelStateScope] = "profile"
	var ann map[string]string
	if in.DomainHash != "" {
		labels[LabelStateScope] = "workspace"
		labels[LabelDomain] = in.DomainHash
		ann = map[string]string{AnnotationWorkspace: in.Workspace}
	}
	if in.Attempt != "" {
		labels[LabelAttempt] = in.Attempt
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: StateName(in.Profile, in.DomainHash), Labels: labels, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if in.StorageClass != "" {
		class := in.StorageClass
		pvc.Spec.StorageClassName = &class
	}
	if in.CloneFrom != "" {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: in.CloneFrom}
	}
	return pvc, nil
}

// checkStateDirs re-checks the dirs (the configuration validated them):
// absolute and clean, not /, not the seed container's view of the volume,
// and each with a sub-path name of its own.
func checkStateDirs(dirs []string) error {
	seen := map[string]bool{}
	for _, d := range dirs {
		if !path.IsAbs(d) || path.Clean(d) != d || d == "/" || d == StateMount || strings.HasPrefix(d, StateMount+"/") {
			return fmt.Errorf("kubespec: persistent dir %q cannot be on the cluster", d)
		}
		n := domain.OverlayName(d)
		if seen[n] || strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".image") {
			return fmt.Errorf("kubespec: persistent dir %q: sub-path %q taken", d, n)
		}
		seen[n] = true
	}
	return nil
}

// addState mounts st into pod: the seed init container first (before the
// network sidecar, so the agent starts on seeded dirs), then each dir's
// sub-path in the agent container.
func addState(pod *corev1.PodSpec, in Input) error {
	st := in.State
	if err := checkStateDirs(st.Dirs); err != nil {
		return err
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: StateVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: st.Claim},
	}})
	args := []string{"lazaret-seed"}
	agent := &pod.Containers[0]
	for _, d := range st.Dirs {
		n := domain.OverlayName(d)
		args = append(args, d, n)
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: StateVolume, MountPath: d, SubPath: n})
	}
	seed := corev1.Container{
		Name:            SeedContainer,
		Image:           in.Image,
		ImagePullPolicy: corev1.PullPolicy(in.ImagePullPolicy),
		Command:         append([]string{"/bin/sh", "-c", seedScript}, args...),
		Env:             []corev1.EnvVar{{Name: SeedImageEnv, Value: in.Image}},
		// The agent's own restrictions: it reads what the agent wrote.
		SecurityContext: agent.SecurityContext.DeepCopy(),
		Resources:       *agent.Resources.DeepCopy(),
		VolumeMounts:    []corev1.VolumeMount{{Name: StateVolume, MountPath: StateMount}},
	}
	pod.InitContainers = append([]corev1.Container{seed}, pod.InitContainers...)
	return nil
}

// seedScript runs in the seed container, from the profile's image, with
// pairs of arguments (a persistent dir, its sub-path). A dir whose marker
// at the volume's root names another image (or none) gets the image's
// files copied in: the whole dir on first use, over what is there after
// an image change (files the agent added stay; files of the image are the
// new image's). The markers are at the root, which the agent container
// never mounts. It needs cp only for dirs the image has. Root without
// capabilities cannot give a file another owner (CAP_CHOWN) nor read a
// directory of another user's that is closed to others (CAP_DAC_OVERRIDE:
// Debian's /var/lib/apt/lists/partial, _apt's 0700): those entries are
// skipped and logged (the agent, as restricted, could not read them
// either); any other failure fails the container (and the pod's start).
// It refuses a dir that is a symbolic link in the image, as
// locally (the copy would follow it).
const seedScript = `set -u
root=` + StateMount + `
want=$` + SeedImageEnv + `
while [ $# -ge 2 ]; do
  dir=$1 name=$2; shift 2
  mark="$root/.$name.image" have=
  if [ -f "$mark" ]; then IFS= read -r have <"$mark" || true; fi
  [ "$have" = "$want" ] && continue
  p=$dir
  while [ -n "$p" ]; do
    if [ -L "$p" ]; then echo "lazaret-seed: $p is a symbolic link in the image: $dir cannot be persistent" >&2; exit 1; fi
    p=${p%/*}
  done
  if [ -d "$dir" ]; then
    command -v cp >/dev/null 2>&1 || { echo "lazaret-seed: the image has no cp to copy $dir" >&2; exit 1; }
    if [ -e "$root/$name" ]; then src="$dir/." dst="$root/$name/"; else src=$dir dst=$root/$name; fi
    if ! err=$(cp -a "$src" "$dst" 2>&1 >/dev/null); then
      bad=
      while IFS= read -r l; do
        case $l in
        '') ;;
        *ownership*|*owner*|*'Permission denied'*) echo "lazaret-seed: skipped: $l" ;;
        *) bad=1; echo "lazaret-seed: $l" >&2 ;;
        esac
      done <<ERR
$err
ERR
      [ -z "$bad" ] || exit 1
    fi
  fi
  printf '%s\n' "$want" >"$mark"
  echo "lazaret-seed: $dir from $want"
done
`
