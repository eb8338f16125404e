package overlayfs

// The scripts below run inside `podman unshare` (uid 0 of the rootless user
// namespace, podman's mount namespace), where the image mount is visible.
// They are constants; every path reaches them as a positional argument,
// never spliced into the text.

// closeFDs closes every descriptor above stderr. podman unshare hands its
// children descriptors of its own (a pipe at fd 251, /dev/null at 10);
// fuse-overlayfs daemonizes and would hold them for as long as the mount
// lives. bash, because dash cannot close a descriptor above 9.
const closeFDs = `for fd in /proc/$$/fd/*; do
  n=${fd##*/}
  case $n in 0|1|2|*[!0-9]*) ;; *) eval "exec $n>&-" ;; esac
done
`

// mountScript mounts one overlay.
//
//	$1 image mount point   $2 container dir (/usr)   $3 empty dir
//	$4 upper (changes)     $5 work                   $6 merged
//	$7 fuse-overlayfs      $8 "new" when the upper dir was just created
//	$9 log file for fuse-overlayfs's stderr
//	$10 driver: overlay, fuse-overlayfs, or auto (overlay, falling back
//	    to fuse-overlayfs where the kernel refuses an unprivileged overlay)
//	$11 lower dirs above the image's, topmost first, ':'-separated, or
//	    empty (a shared root: the stacked pending layers, the profile's)
//
// It prints the driver it used.
//
// The lower dir must be a real directory in the image: a symlink (Debian's
// /bin → usr/bin) would be resolved by fuse-overlayfs in this namespace,
// where an absolute target names a host path, so it is refused. A dir the
// image does not have gets an empty lower dir.
//
// Only shell builtins but for mount itself (`cd -P` resolves symlinks as
// realpath did, mountinfo is read as mountpoint did): the overlays are
// mounted beside podman's start, and on a small machine every program
// started is several milliseconds of CPU taken from it (docs/PERFORMANCE.md).
const mountScript = `set -eu
` + closeFDs + `
mounted() {
  local want=$1 f
  want=${want//\\/\\134}; want=${want// /\\040}; want=${want//$'\t'/\\011}; want=${want//$'\n'/\\012}
  while read -r _ _ _ _ f _; do [ "$f" = "$want" ] && return 0; done </proc/self/mountinfo
  return 1
}
cd -P -- "$1"
lower=$PWD$2
if [ -e "$lower" ] || [ -L "$lower" ]; then
  [ -e "$lower" ] || { echo "$2: dangling symlink in the image" >&2; exit 3; }
  if [ -d "$lower" ]; then cd -P -- "$lower"; real=$PWD
  else cd -P -- "${lower%/*}"; real=$PWD/${lower##*/}; [ ! -L "$lower" ] || real=
  fi
  if [ "$real" != "$lower" ]; then echo "$2: is or passes through a symlink in the image" >&2; exit 3; fi
  if [ ! -d "$lower" ]; then echo "$2: not a directory in the image" >&2; exit 3; fi
else
  lower=$3
fi
# Not left inside the image: fuse-overlayfs would keep it as its cwd.
cd /
case $lower in *[,:=\\]*) echo "$2: image path $lower has a character fuse-overlayfs cannot take" >&2; exit 3 ;; esac
if [ "$8" = new ]; then
  # The merged root takes the upper root's owner and mode: make it the
  # image's, not that of a directory the host user created.
  chown --reference="$lower" -- "$4"
  chmod --reference="$lower" -- "$4"
fi
if mounted "$6"; then echo "$6: already a mount point" >&2; exit 3; fi
[ -z "${11:-}" ] || lower=${11}:$lower
opts="lowerdir=$lower,upperdir=$4,workdir=$5"
if [ "${10}" != fuse-overlayfs ]; then
  # Kernel overlayfs, unprivileged in this user namespace (Linux >= 5.11):
  # no daemon, several times faster than FUSE (docs/STATEANCHOR.md).
  if mount -t overlay -o "$opts,userxattr" overlay "$6" 2>"$9"; then
    echo overlay; exit 0
  fi
  if [ "${10}" = overlay ]; then cat -- "$9" >&2; exit 3; fi
fi
"$7" -o "$opts" "$6" </dev/null >/dev/null 2>"$9" || {
  rc=$?; cat -- "$9" >&2; exit $rc; }
mounted "$6" || { echo "$6: fuse-overlayfs exited but nothing is mounted" >&2; cat -- "$9" >&2; exit 3; }
echo fuse-overlayfs
`

// unmountScript unmounts each argument: cleanly when nothing uses the
// mount, lazily (detached, freed when the last user goes) otherwise.
// umount -c: a FUSE mount whose daemon died fails every stat (ENOTCONN).
const unmountScript = `set -u
rc=0
for m; do
  umount -c -- "$m" 2>/dev/null || umount -l -c -- "$m" || rc=1
done
exit $rc
`
