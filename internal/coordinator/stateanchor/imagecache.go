package stateanchor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// imageCacheFile (beside the overlay root, statestore.SideFile) keeps the
// last `podman image inspect` of the profile's image with the state of
// podman's image index it was taken against: the inspect is about 50 ms
// of the State Anchor's prepare, on the cold start's critical path
// (docs/PERFORMANCE.md, 2026-12-03 16:15). containers/storage rewrites
// its index (overlay-images/images.json, a new file renamed over the old)
// whenever an image is added, removed or tagged, so an unchanged index
// means the reference still names the same image and layers.
const imageCacheFile = "image-inspect.json"

type imageCache struct {
	Ref   string           `json:"ref"`
	Index indexStamp       `json:"index"`
	Info  podman.ImageInfo `json:"info"`
}

// indexStamp identifies one version of podman's image index.
type indexStamp struct {
	Path    string `json:"path"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
}

// indexPath is podman's image index for an image whose single overlay
// layer is info's: <graphroot>/overlay/<layer>/diff gives
// <graphroot>/overlay-images/images.json. Only single-layer images are
// cached: any other needs an image mount through podman anyway.
func indexPath(info *podman.ImageInfo) (string, bool) {
	dir, ok := info.SingleLayerDir()
	if !ok || filepath.Base(dir) != "diff" {
		return "", false
	}
	overlay := filepath.Dir(filepath.Dir(dir))
	if filepath.Base(overlay) != "overlay" {
		return "", false
	}
	return filepath.Join(filepath.Dir(overlay), "overlay-images", "images.json"), true
}

func stampOf(path string) (indexStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return indexStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return indexStamp{}, false
	}
	return indexStamp{Path: path, Dev: uint64(st.Dev), Ino: st.Ino, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano()}, true
}

// inspectImage returns the image's inspect: the cached one while podman's
// image index is the one it was taken against, otherwise podman's (and
// the cache is renewed). The index is stamped before podman runs, so a
// change during the inspect makes the next start inspect again.
func (c *Component) inspectImage(ctx context.Context) (*podman.ImageInfo, error) {
	cacheFile := statestore.SideFile(c.root, imageCacheFile)
	var prev imageCache
	ok, _ := statestore.ReadJSON(cacheFile, &prev)
	var before indexStamp
	var stamped bool
	if ok && prev.Index.Path != "" {
		before, stamped = stampOf(prev.Index.Path)
		if stamped && prev.Ref == c.opt.Image && before == prev.Index {
			if p, ok := indexPath(&prev.Info); ok && p == prev.Index.Path && isDir(mustLayer(&prev.Info)) {
				c.log.Debug("image inspect from the cache", "image", c.opt.Image, "id", short(prev.Info.ID))
				return &prev.Info, nil
			}
		}
	}
	img, err := c.opt.Podman.InspectImage(ctx, c.opt.Image)
	if err != nil {
		return nil, err
	}
	next := imageCache{Ref: c.opt.Image, Info: *img}
	if p, ok := indexPath(img); ok {
		next.Index.Path = p // known from now on; stamped by the next start
		if stamped && before.Path == p {
			next.Index = before
		}
	}
	if err := statestore.WriteJSON(cacheFile, &next); err != nil {
		c.log.Debug("image inspect cache not written", "err", err)
	}
	return img, nil
}

func mustLayer(info *podman.ImageInfo) string {
	dir, _ := info.SingleLayerDir()
	return dir
}

func isDir(p string) bool {
	if p == "" {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
