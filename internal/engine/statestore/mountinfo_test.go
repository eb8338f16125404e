package statestore

import (
	"reflect"
	"testing"
)

const sampleMountinfo = `22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
46 22 0:40 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw
67 66 0:40 / /home/u/.local/share/containers/storage/overlay/abc/merged rw,nodev,noatime - fuse.fuse-overlayfs fuse-overlayfs rw,user_id=0
68 46 0:41 / /data/domains/aaa/overlay/usr/usr_merged rw,nodev,noatime - fuse.fuse-overlayfs fuse-overlayfs rw,user_id=0
69 46 0:42 / /data/domains/aaa/overlay/my\040dir/x_merged rw,nodev - fuse.fuse-overlayfs fuse-overlayfs rw
70 68 0:43 / /data/domains/aaa/overlay/usr/usr_merged/local rw shared:5 master:2 - tmpfs tmpfs rw
71 46 0:44 / /data/domains/aaab/overlay/usr/usr_merged rw - fuse.fuse-overlayfs fuse-overlayfs rw
`

func TestParseMountinfo(t *testing.T) {
	ms, err := ParseMountinfo([]byte(sampleMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 7 {
		t.Fatalf("%d mounts", len(ms))
	}
	if ms[4].MountPoint != "/data/domains/aaa/overlay/my dir/x_merged" || ms[4].FSType != "fuse.fuse-overlayfs" {
		t.Errorf("escaped line: %+v", ms[4])
	}
	if ms[5].FSType != "tmpfs" || ms[5].ID != 70 {
		t.Errorf("optional fields: %+v", ms[5])
	}
	var got []string
	for _, m := range MountsUnder(ms, "/data/domains/aaa/overlay") {
		got = append(got, m.MountPoint)
	}
	want := []string{
		"/data/domains/aaa/overlay/usr/usr_merged/local",
		"/data/domains/aaa/overlay/my dir/x_merged",
		"/data/domains/aaa/overlay/usr/usr_merged",
	}
	// aaab (another domain sharing a prefix) is not included; deepest first.
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MountsUnder = %q, want %q", got, want)
	}
}

func TestParseMountinfoErrors(t *testing.T) {
	for _, in := range []string{
		"garbage\n",
		"1 2 0:1 / /x rw no separator here\n",
		"x 2 0:1 / /x rw - ext4 src rw\n",
		"1 2 0:1 / relative rw - ext4 src rw\n",
		"1 2 0:1 / /bad\\09 rw - ext4 src rw\n",
		"1 2 0:1 / /trunc\\04 rw - ext4 src rw\n",
		"1 2 0:1 / /x rw -\n",
	} {
		if _, err := ParseMountinfo([]byte(in)); err == nil {
			t.Errorf("ParseMountinfo(%q) succeeded", in)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte(sampleMountinfo))
	f.Add([]byte("1 2 0:1 / /a\\040b rw - ext4 s rw\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMountinfo(data)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.MountPoint == "" || m.MountPoint[0] != '/' {
				t.Fatalf("mount point %q", m.MountPoint)
			}
		}
		_ = MountsUnder(ms, "/a")
	})
}
