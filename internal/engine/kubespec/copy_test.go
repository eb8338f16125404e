package kubespec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func copyInput() CopyInput {
	return CopyInput{Kind: "fork", Hash: "0123456789ab", Profile: "dev", Attempt: "try-1", Image: "agent:1", ImagePullPolicy: "Never",
		RuntimeClass: "gvisor", Source: "lazaret-state-dev-x", Dest: "lazaret-state-0123456789ab", Mode: CopyNew, Node: "node-1"}
}

// TestCopyPod: the copy pod is as restricted as the agent (under the
// RuntimeClass, no capability, no token), mounts the source read-only
// (volume and mount), never restarts, and is pinned to the source's node.
func TestCopyPod(t *testing.T) {
	pod, err := CopyPod(copyInput())
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if pod.Name != "lazaret-fork-0123456789ab" || pod.Labels[LabelAttempt] != "try-1" || pod.Labels[LabelDomain] != "0123456789ab" || pod.Labels[LabelManagedBy] != ManagedByValue {
		t.Errorf("meta %+v", pod.ObjectMeta)
	}
	if *s.RuntimeClassName != "gvisor" || *s.AutomountServiceAccountToken || *s.EnableServiceLinks || s.RestartPolicy != corev1.RestartPolicyNever || s.HostNetwork || s.HostPID {
		t.Errorf("pod spec %+v", s)
	}
	c := s.Containers[0]
	sc := c.SecurityContext
	if len(s.Containers) != 1 || sc == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 || *sc.AllowPrivilegeEscalation || *sc.Privileged {
		t.Errorf("container %+v", c)
	}
	if c.Image != "agent:1" || strings.Join(c.Command[3:], " ") != "lazaret-copy new /.lazaret-src /.lazaret-dst /dev/termination-log" {
		t.Errorf("command %q", c.Command)
	}
	if !s.Volumes[0].PersistentVolumeClaim.ReadOnly || s.Volumes[0].PersistentVolumeClaim.ClaimName != "lazaret-state-dev-x" || !c.VolumeMounts[0].ReadOnly ||
		s.Volumes[1].PersistentVolumeClaim.ReadOnly || s.Volumes[1].PersistentVolumeClaim.ClaimName != "lazaret-state-0123456789ab" || c.VolumeMounts[1].ReadOnly {
		t.Errorf("volumes %+v mounts %+v", s.Volumes, c.VolumeMounts)
	}
	if f := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]; f.Key != "metadata.name" || f.Values[0] != "node-1" {
		t.Errorf("affinity %+v", f)
	}
	in := copyInput()
	in.Dest = in.Source
	if _, err := CopyPod(in); err == nil {
		t.Error("a copy onto its own source was made")
	}
}

// TestAttemptPVC: an attempt's PVC is its Domain Anchor's, labelled with
// the attempt, and a clone names its source.
func TestAttemptPVC(t *testing.T) {
	pvc, err := StatePVC(StateInput{Profile: "dev", DomainHash: "0123456789ab", Workspace: "/ws", Size: "3Gi", StorageClass: "csi", Attempt: "try-1", CloneFrom: "lazaret-state-dev-x"})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Name != "lazaret-state-0123456789ab" || pvc.Labels[LabelAttempt] != "try-1" || pvc.Labels[LabelStateScope] != "workspace" ||
		pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "PersistentVolumeClaim" || pvc.Spec.DataSource.Name != "lazaret-state-dev-x" {
		t.Errorf("PVC %+v", pvc)
	}
	c := Claim(ClaimInput{Profile: "dev", DomainHash: "0123456789ab", Attempt: "try-1", WarmPool: "p"})
	if c.Labels[LabelAttempt] != "try-1" || c.Name != "lazaret-0123456789ab" {
		t.Errorf("claim %+v", c.ObjectMeta)
	}
}

// TestCopyScript runs the copy script with the host's sh and cp: a new
// volume gets the source (links as links); one that has every entry (a
// clone) is left alone and says "clone"; replace makes the destination
// the source (an entry only the old one had is gone, lost+found stays);
// a file cp cannot read fails the copy with its line.
func TestCopyScript(t *testing.T) {
	for _, sh := range [][]string{{"/bin/sh"}, {"/bin/busybox", "sh"}} {
		if _, err := os.Stat(sh[0]); err != nil {
			continue
		}
		t.Run(filepath.Base(sh[0]), func(t *testing.T) { testCopyScript(t, sh) })
	}
}

func testCopyScript(t *testing.T, sh []string) {
	tmp := t.TempDir()
	src, dst, msg := filepath.Join(tmp, "src"), filepath.Join(tmp, "dst"), filepath.Join(tmp, "msg")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	run := func(mode, d string) (string, error) {
		cmd := exec.Command(sh[0], append(sh[1:], "-c", copyScript, CopyContainer, mode, src, d, msg)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s: %s", mode, d, out)
		return read(msg), err
	}
	write(src+"/usr/bin/tool", "parent")
	write(src+"/.usr.image", "img:1\n")
	if err := os.Symlink("/etc/passwd", src+"/usr/link"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst+"/lost+found", 0o700); err != nil {
		t.Fatal(err)
	}
	if m, err := run("new", dst); err != nil || !strings.HasPrefix(m, "copy ") {
		t.Fatalf("new: %v, message %q", err, m)
	}
	if read(dst+"/usr/bin/tool") != "parent" || read(dst+"/.usr.image") != "img:1\n" {
		t.Fatal("new: the source was not copied")
	}
	if l, err := os.Readlink(dst + "/usr/link"); err != nil || l != "/etc/passwd" {
		t.Errorf("the link: %q %v", l, err)
	}
	write(dst+"/usr/bin/mine", "attempt")
	if m, err := run("new", dst); err != nil || !strings.HasPrefix(m, "clone ") || read(dst+"/usr/bin/mine") != "attempt" {
		t.Errorf("a complete destination: %v, message %q", err, m)
	}
	// replace: dst (the profile's) becomes src.
	src, dst = dst, src
	write(dst+"/.old-only", "x")
	if m, err := run("replace", dst); err != nil || !strings.HasPrefix(m, "copy ") {
		t.Fatalf("replace: %v, message %q", err, m)
	}
	if read(dst+"/usr/bin/mine") != "attempt" || read(dst+"/usr/bin/tool") != "parent" {
		t.Error("replace: the source's files are not there")
	}
	if _, err := os.Lstat(dst + "/.lazaret-keep"); err == nil {
		t.Error("replace left its directory")
	}
	if _, err := os.Lstat(dst + "/.old-only"); err == nil {
		t.Error("replace kept an entry only the old content had")
	}
	if _, err := os.Lstat(src + "/lost+found"); err != nil {
		t.Error("lost+found of the source went")
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(src+"/usr/bin/mine", 0); err != nil {
			t.Fatal(err)
		}
		if m, err := run("new", filepath.Join(tmp, "third")); err == nil || !strings.HasPrefix(m, "cp: ") || !strings.Contains(m, "mine") {
			t.Errorf("an unreadable file: %v, message %q", err, m)
		}
	}
}
