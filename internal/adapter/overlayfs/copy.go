package overlayfs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/execx"
)

// Copy modes.
const (
	CopyReflink = "reflink" // the files share their blocks with the source's
	CopyPlain   = "copy"    // the data was copied
)

// Copy copies the tree src to dst, which must not exist, as root of
// podman's user namespace: the only user that may read every file of a
// layer (the sandbox's sub-uids, modes the agent closed) and give the copy
// the same owners. `cp -a --preserve=xattr` keeps owners, modes, times,
// hard links, symlinks, device nodes (the overlay whiteouts, char 0:0) and
// the xattrs (user.overlay.opaque, fuse-overlayfs's marks), and fails
// rather than drop an xattr it cannot set, which plain -a would do
// silently. It clones the files (reflink) where the file system can, and
// copies the data where it cannot; it returns CopyReflink or CopyPlain. A
// failure removes what it made; the error's text is one line that names
// the cause (cp's first complaint, "No space left on device" say).
func (c *Client) Copy(ctx context.Context, src, dst string) (string, error) {
	out, err := c.ns.Run(ctx, "bash", "-c", copyScript, "stateanchor-copy", "copy", src, dst)
	if err != nil {
		return "", fmt.Errorf("copying %s to %s: %s", src, dst, failure(err))
	}
	switch mode := strings.TrimSpace(string(out)); mode {
	case CopyReflink, CopyPlain:
		return mode, nil
	default:
		return "", fmt.Errorf("copying %s to %s: unexpected output %q", src, dst, out)
	}
}

// CanReflink reports whether a copy of src into dir clones its files: a
// file of src (or, when src holds no data, a file made in dir) is cloned
// into dir and removed. A caller that must know the cost of a Copy before
// it begins (is there room for it?) asks this first.
func (c *Client) CanReflink(ctx context.Context, src, dir string) (bool, error) {
	out, err := c.ns.Run(ctx, "bash", "-c", copyScript, "stateanchor-copy", "probe", src, dir)
	if err != nil {
		return false, fmt.Errorf("probing reflinks from %s to %s: %s", src, dir, failure(err))
	}
	return strings.TrimSpace(string(out)) == "yes", nil
}

// failure is the one line of a failed command that says why: the message
// the script chose, without podman's prefix.
func failure(err error) string {
	var pe *podman.Error
	if errors.As(err, &pe) {
		if line := execx.LastLine(pe.Stderr); line != "" {
			return line
		}
	}
	return err.Error()
}

// copyScript copies a tree (Copy) or probes reflinks (CanReflink).
//
//	$1 "copy": $2 source tree, $3 destination (must not exist); prints
//	   reflink or copy
//	$1 "probe": $2 source tree, $3 a directory on the destination's file
//	   system; prints yes or no
//
// The reflink attempt begins with one file: cp --reflink=always goes on
// through the whole tree after its first clone fails (measured: every
// file of the tree fails in turn), so a file system without reflinks
// would cost a second walk of the tree. The clone's failures that mean
// "not here" (EOPNOTSUPP, EXDEV, EINVAL, ENOTTY) fall back to a plain
// copy; any other failure is the copy's. Messages in the C locale, so
// that they can be told apart.
const copyScript = `set -u
export LC_ALL=C
verb=$1 src=$2 dst=$3
unsupported() {
  case $1 in
    *"Operation not supported"*|*"Invalid cross-device link"*|*"Invalid argument"*|*"Inappropriate ioctl"*) return 0 ;;
  esac
  return 1
}
# probe DIR: can a file of $src be cloned into DIR?
probe() {
  local f t=$1/.reflink-probe.$$ made= err
  f=$(find "$src" -type f -size +0 -print -quit 2>/dev/null) || f=
  if [ -z "$f" ]; then f=$1/.reflink-source.$$; made=$f; printf x >"$f" || return 2; fi
  err=$(cp --reflink=always -- "$f" "$t" 2>&1); rc=$?
  rm -f -- "$t" ${made:+"$made"}
  [ $rc -eq 0 ] && return 0
  unsupported "$err" && return 1
  printf '%s\n' "$err" | head -n 1 >&2
  return 2
}
fail() {
  rm -rf -- "$dst"
  printf '%s\n' "$1" | head -n 1 >&2
  exit 1
}
[ -d "$src" ] && [ ! -L "$src" ] || { echo "$src: not a directory" >&2; exit 3; }
if [ "$verb" = probe ]; then
  probe "$dst"; rc=$?
  case $rc in 0) echo yes ;; 1) echo no ;; *) exit 1 ;; esac
  exit 0
fi
if [ -e "$dst" ] || [ -L "$dst" ]; then echo "$dst: already exists" >&2; exit 3; fi
probe "$(dirname -- "$dst")"; rc=$?
[ $rc -le 1 ] || exit 1
if [ $rc -eq 0 ]; then
  if err=$(cp -a --preserve=xattr --reflink=always -- "$src" "$dst" 2>&1); then echo reflink; exit 0; fi
  unsupported "$err" || fail "$err"
  rm -rf -- "$dst" || exit 1
fi
err=$(cp -a --preserve=xattr -- "$src" "$dst" 2>&1) || fail "$err"
echo copy
`
