# Shared shell functions of lazaret's scripts (sourced, not run).

# RUN_USER is the unprivileged user lazaret runs as: the caller, or, when
# the caller is root, the user the setup creates.
if [ "$(id -u)" -eq 0 ]; then
	RUN_USER=${LAZARET_USER:-lazaret}
	PREFIX=${PREFIX:-/usr/local}
else
	RUN_USER=$(id -un)
	PREFIX=${PREFIX:-$HOME/.local}
fi
LIBDIR="$PREFIX/lib/lazaret"
export PATH="$PREFIX/bin:/usr/local/go/bin:$PATH"

step() { printf '==> %s\n' "$*" >&2; }
ok() { printf '    ok: %s\n' "$*" >&2; }
warn() { printf '    warning: %s\n' "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# as_root runs a command as root (directly, or through sudo).
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo "$@"
	fi
}

# as_prefix_owner writes into PREFIX: root's /usr/local as root, the user's
# own ~/.local without sudo.
as_prefix_owner() {
	if [ -w "$(dirname "$PREFIX")" ] || [ -w "$PREFIX" ]; then
		"$@"
	else
		as_root "$@"
	fi
}

# install_debs installs the Debian packages named that are missing
# (scripts/setup's list; scripts/bench's own for one benchmark).
install_debs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		ok "Debian packages present"
		return
	fi
	step "installing Debian packages: ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	ok "installed ${#missing[@]} packages"
}

# as_user runs a command as RUN_USER with the rootless environment podman
# needs (its own HOME and XDG_RUNTIME_DIR), from a directory it can read.
as_user() {
	local uid home
	uid=$(id -u "$RUN_USER")
	home=$(getent passwd "$RUN_USER" | cut -d: -f6)
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u "$RUN_USER" -- env HOME="$home" USER="$RUN_USER" LOGNAME="$RUN_USER" \
			XDG_RUNTIME_DIR="/run/user/$uid" PATH="$PATH" "$@")
	else
		XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/run/user/$uid} "$@"
	fi
}

# progress_filter shows a dot per line of a long, chatty step.
progress_filter() {
	local n=0
	while IFS= read -r line; do
		n=$((n + 1))
		case "$line" in
		*rror* | *failed*) printf '\n    %s\n' "$line" >&2 ;;
		*) [ $((n % 10)) -eq 0 ] && printf '.' >&2 ;;
		esac
	done
	[ "$n" -ge 10 ] && printf '\n' >&2
	return 0
}

file_is_static() {
	# A static Go binary has no program interpreter.
	! readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter' && [ -s "$1" ]
}
