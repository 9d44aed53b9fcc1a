# Shared by scripts/demo and scripts/test: install what is missing, configure
# and build. Works as root, or as a user with sudo. Sourced, not run.

TROUPE_DEPS=(
	gcc pkg-config meson ninja-build python3 curl
	libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libjemalloc-dev libck-dev
	libcmocka-dev libyaml-dev wrk gnuplot-nox
)

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root or sudo to run: $*"
	fi
}

# Install every Debian package troupe needs that is not installed yet.
ensure_deps() {
	local missing=() p
	for p in "${TROUPE_DEPS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]}"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

# configure_build DIR [meson options...]: set up DIR once, reconfigure if the
# options changed, then build.
configure_build() {
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" >/dev/null || die "meson setup $dir failed"
	fi
	ninja -C "$dir" >/dev/null || { ninja -C "$dir"; die "build in $dir failed"; }
}
