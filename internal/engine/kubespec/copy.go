package kubespec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The copy of a state PVC into another: a fork gives each attempt a copy
// of its parent's persistent dirs (CopyNew: into the attempt's new PVC,
// or only checked when the storage class cloned it), `attempts keep`
// makes an attempt's the profile's (CopyReplace). A short-lived pod of
// the profile's image, as restricted as the agent and under the pod's
// RuntimeClass: the volumes hold what the agent wrote, and cp reads them.
const (
	CopyContainer = "lazaret-copy"
	copySource    = "/.lazaret-src"
	copyDest      = "/.lazaret-dst"
	// LabelCopy is "fork" or "keep" on a copy pod.
	LabelCopy = "lazaret.dev/copy"
)

// CopyMode is what a copy pod does with its destination.
type CopyMode string

const (
	// CopyNew fills a new PVC: when every top-level entry of the source
	// is already there (a clone the storage class made) nothing is
	// copied, else the source is copied in.
	CopyNew CopyMode = "new"
	// CopyReplace makes the destination's content the source's: copied
	// beside it first, then the old entries removed and the new moved
	// up (renames within the volume), so a failed copy leaves the
	// destination as it was.
	CopyReplace CopyMode = "replace"
)

// CopyInput is one copy pod.
type CopyInput struct {
	// Kind is "fork" or "keep"; Hash the attempt's Domain Anchor.
	Kind, Hash             string
	Profile, Attempt       string
	Image, ImagePullPolicy string
	RuntimeClass           string
	Source, Dest           string // PVC names
	Mode                   CopyMode
	// Node, when set, is the node the pod must run on: the one whose
	// pod mounts the source (a ReadWriteOnce volume is attached to one
	// node at a time).
	Node string
}

// CopyPodName is the copy pod of kind ("fork", "keep") for the attempt
// of Domain Anchor hash.
func CopyPodName(kind, hash string) string { return "lazaret-" + kind + "-" + hash }

// CopyPod is the pod that copies in.Source into in.Dest. Its container
// writes "<how> <KiB>" (how: "clone" or "copy", KiB: the destination's
// size by du) to its termination message, or why it failed (cp's first
// complaint: the agent's file names, to be shown escaped).
func CopyPod(in CopyInput) (*corev1.Pod, error) {
	if in.Image == "" || in.RuntimeClass == "" || in.Source == "" || in.Dest == "" || in.Source == in.Dest {
		return nil, fmt.Errorf("kubespec: a copy needs an image, a runtime class and two PVCs")
	}
	if in.Mode != CopyNew && in.Mode != CopyReplace {
		return nil, fmt.Errorf("kubespec: copy mode %q", in.Mode)
	}
	labels := managedLabels(in.Profile)
	labels[LabelCopy] = in.Kind
	labels[LabelDomain] = in.Hash
	labels[LabelAttempt] = in.Attempt
	f := false
	runtimeClass := in.RuntimeClass
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: CopyPodName(in.Kind, in.Hash), Labels: labels},
		Spec: corev1.PodSpec{
			RuntimeClassName:              &runtimeClass,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			ShareProcessNamespace:         &f,
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: seccomp},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr64(5),
			Containers: []corev1.Container{{
				Name:            CopyContainer,
				Image:           in.Image,
				ImagePullPolicy: corev1.PullPolicy(in.ImagePullPolicy),
				Command:         []string{"/bin/sh", "-c", copyScript, CopyContainer, string(in.Mode), copySource, copyDest, "/dev/termination-log"},
				SecurityContext: agentSecurityContext(seccomp),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "source", MountPath: copySource, ReadOnly: true},
					{Name: "dest", MountPath: copyDest},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{
				{Name: "source", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: in.Source, ReadOnly: true}}},
				{Name: "dest", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: in.Dest}}},
			},
		},
	}
	if in.Node != "" {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{in.Node}}},
			}}},
		}}
	}
	return pod, nil
}

// copyScript runs in the copy pod with arguments MODE SOURCE DEST
// MESSAGE-FILE. cp -a copies symbolic links as links (it never follows
// one of the agent's out of the volume); as root without CAP_CHOWN it
// cannot give a file another owner (those complaints are dropped: on the
// volume every file is already the agent's user's, as the seed and the
// agent wrote them); any other failure fails the pod with its first line.
// lost+found (a fresh ext4 volume's) is neither compared nor moved.
const copyScript = `set -u
mode=$1 src=$2 dst=$3 out=$4
each() {
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    if [ -e "$f" ] || [ -L "$f" ]; then
      case ${f##*/} in lost+found) ;; *) "$2" "$f" || return 1 ;; esac
    fi
  done
}
fail() { printf '%s\n' "$1" >"$out"; echo "lazaret-copy: $1" >&2; exit 1; }
copy() {
  if ! err=$(cp -a "$1/." "$2/" 2>&1 >/dev/null); then
    bad=
    while IFS= read -r l; do
      case $l in
      ''|*ownership*) ;;
      *) bad=$l; break ;;
      esac
    done <<ERR
$err
ERR
    [ -z "$bad" ] || fail "$bad"
  fi
}
have() { [ -e "$dst/${1##*/}" ] || [ -L "$dst/${1##*/}" ]; }
drop() { [ "$1" = "$tmp" ] || rm -rf "$1"; }
up() { mv "$1" "$dst/"; }
how=copy
case $mode in
new)
  how=clone
  if ! each "$src" have; then how=copy; copy "$src" "$dst"; fi
  ;;
replace)
  tmp=$dst/.lazaret-keep
  { rm -rf "$tmp" && mkdir "$tmp"; } || fail "making the copy's directory"
  copy "$src" "$tmp"
  each "$dst" drop || fail "removing the old content"
  each "$tmp" up || fail "moving the copy into place"
  rm -rf "$tmp" || fail "removing the copy's directory"
  ;;
*) fail "mode $mode" ;;
esac
kib=$(du -sk "$dst" 2>/dev/null) || kib=0
kib=${kib%%[!0-9]*}
printf '%s %s\n' "$how" "${kib:-0}" >"$out"
echo "lazaret-copy: $how, ${kib:-0} KiB"
`
