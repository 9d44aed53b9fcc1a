# Shared by scripts/demo and scripts/test: install what is missing, configure
# and build. Works as root, or as a user with sudo. Sourced, not run.

TROUPE_DEPS=(
	gcc pkg-config meson ninja-build python3 curl
	libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libjemalloc-dev libck-dev
	libcmocka-dev libyaml-dev wrk gnuplot-nox prometheus chromium
	libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
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

# ensure_browser_tools DIR: playwright-core, pinned by tests/browser/package-lock.json,
# for the dashboard's headless-Chromium test (tests/browser/), into
# DIR/browser/node_modules where its meson test looks; `npm ci` again only when
# the lock file changed. No browser is downloaded: the test drives Debian's
# chromium (TROUPE_DEPS). Node.js 20 or newer with npm must be installed.
ensure_browser_tools() {
	local dir=$1/browser lock=tests/browser/package-lock.json
	if cmp -s "$lock" "$dir/package-lock.json" && [ -d "$dir/node_modules/playwright-core" ]; then
		return 0
	fi
	command -v npm >/dev/null 2>&1 || die "the dashboard's browser test needs Node.js 20+ and npm"
	say "installing playwright-core ($lock) into $dir"
	mkdir -p "$dir"
	cp tests/browser/package.json "$lock" "$dir/"
	(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error) ||
		die "npm ci in $dir failed"
}

# The optimized build every script shares (build/): meson's debugoptimized
# (-O2 -g) with assertions kept, jemalloc as the daemon ships.
OPTIMIZED_BUILD_OPTS=(-Dbuildtype=debugoptimized -Db_ndebug=false)

# The options configure_build manages, with the values a directory gets when a
# call does not name them. Every call sets all of them, so what a directory was
# configured with before cannot leak into what it is asked to be now.
BUILD_OPTION_DEFAULTS=(-Dbuildtype=debugoptimized -Db_ndebug=if-release -Db_sanitize=none
	-Db_lundef=true -Djemalloc=enabled)

# configure_build DIR [-Dname=value...]: set up DIR, or reconfigure it when the
# options asked for differ from those it was last configured with (so a
# directory once built without sanitizers cannot run as the sanitizer build),
# then build. The options are checked against what meson reports afterwards.
configure_build() {
	local dir=$1
	shift
	local args=() opt d
	for d in "${BUILD_OPTION_DEFAULTS[@]}"; do
		case " $* " in *" ${d%%=*}="*) ;; *) args+=("$d") ;; esac
	done
	args+=("$@")
	local stamp="$dir/.troupe-options" want="${args[*]}"
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "${args[@]}" >/dev/null || die "meson setup $dir failed"
	elif [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
		say "reconfiguring $dir: options '$(cat "$stamp" 2>/dev/null || echo unknown)' -> '$want'"
		# meson configure, not setup --reconfigure: meson 1.0 ignores b_*
		# options given to a reconfigure (they would silently stay as they were).
		meson configure "$dir" "${args[@]}" >/dev/null || die "meson configure $dir failed"
	fi
	check_build_options "$dir" "${args[@]}"
	printf '%s' "$want" >"$stamp"
	ninja -C "$dir" >/dev/null || { ninja -C "$dir"; die "build in $dir failed"; }
}

# check_build_options DIR [-Dname=value...]: die unless DIR's configured value
# of every option named is the one asked for.
check_build_options() {
	local dir=$1
	shift
	python3 - "$dir" "$@" <<'PY' || die "$dir is not configured as asked (see above)"
import json, subprocess, sys
opts = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", sys.argv[1]],
                                 check=True, capture_output=True, text=True).stdout)
have = {o["name"]: o["value"] for o in opts}
bad = 0
for arg in sys.argv[2:]:
    name, _, value = arg[2:].partition("=")
    got = have.get(name)
    got = ",".join(got) if isinstance(got, list) else str(got).lower() if isinstance(got, bool) else str(got)
    if got != value:
        print(f"error: {sys.argv[1]}: option {name} is {got!r}, asked {value!r}", file=sys.stderr)
        bad = 1
sys.exit(bad)
PY
}
