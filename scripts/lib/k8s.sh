# Build the real Kubernetes components troupe's end-to-end tests run against:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd,
# from their own Go modules through the module proxy, plus the rig's kubesim.
# Sourced after common.sh. Go is test tooling only; the daemon stays C.
#
# The binaries are cached in build/k8s/<release>/, keyed by the module's
# go.mod and go.sum: a second run rebuilds nothing. Go's own module and build
# caches stay in their default places (go env GOMODCACHE GOCACHE).

K8S_RELEASE_DEFAULT=v1.37.2
K8S_GO_TOOLCHAIN=go1.26.8
K8S_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)

# The Go module that pins each tested release (tests/e2e/README.md).
k8s_module() {
	case $1 in
	v1.37.*) echo tests/e2e ;;
	v1.36.*) echo tests/e2e/release-1.36 ;;
	*) die "no Go module pins Kubernetes $1 (tested: v1.37.2, v1.36.3)" ;;
	esac
}

# A Go toolchain new enough for the modules (go.mod says go 1.26). The machine's
# go is used when it is; an older one (1.21+) fetches the right toolchain through
# the module proxy (GOTOOLCHAIN); with none, Debian's golang-go is installed first.
ensure_go() {
	if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
		export PATH=/usr/local/go/bin:$PATH
	fi
	if ! command -v go >/dev/null 2>&1; then
		say "installing golang-go (Go is for test tooling only)"
		as_root apt-get update -qq
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			golang-go ca-certificates >/dev/null
	fi
	export GOTOOLCHAIN=${GOTOOLCHAIN:-$K8S_GO_TOOLCHAIN+auto}
	export GOFLAGS="${GOFLAGS:-} -mod=readonly"
	go version >/dev/null 2>&1 || die "go does not run (GOTOOLCHAIN=$GOTOOLCHAIN): $(go version 2>&1)"
}

k8s_ldflags() {
	local v=$1 minor
	minor=$(echo "$v" | cut -d. -f2)
	local x="-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1"
	x="$x -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
	x="$x -X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1"
	x="$x -X k8s.io/client-go/pkg/version.gitMinor=$minor"
	echo "-s -w $x"
}

# ensure_k8s [RELEASE]: build what is missing for RELEASE into build/k8s/RELEASE.
ensure_k8s() {
	local version=${1:-$K8S_RELEASE_DEFAULT} mod out stamp want have=1 t
	mod=$(k8s_module "$version")
	out=$PWD/build/k8s/$version
	ensure_go
	want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
	for t in "${K8S_TOOLS[@]}"; do
		[ -x "$out/$t" ] || have=0
	done
	[ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ] || have=0
	if [ $have -eq 0 ]; then
		mkdir -p "$out"
		rm -f "$out/.stamp"
		say "building Kubernetes $version (${K8S_TOOLS[*]}) from $mod/go.mod in one go build; the first build takes a while"
		local extra=() start=$SECONDS log=$out/build.log
		# The rig's own program shares the release's packages: same invocation.
		[ "$mod" = tests/e2e ] && extra=(./cmd/kubesim)
		if ! (cd "$mod" && go build -trimpath -ldflags "$(k8s_ldflags "$version")" -o "$out/" tool \
			"${extra[@]}") >"$log" 2>&1; then
			cat "$log" >&2
			if grep -qE "(reading|verifying|downloading).*(404|410|403|not found|Forbidden)" "$log"; then
				die "the Go module proxy cannot serve a module Kubernetes $version needs (above); see $log"
			fi
			die "building Kubernetes $version failed; see $log"
		fi
		# etcd's main package is go.etcd.io/etcd/server/v3, which go build names "server".
		mv -f "$out/server" "$out/etcd"
		echo "$want" >"$out/.stamp"
		say "built Kubernetes $version in $((SECONDS - start)) s"
	fi
	ensure_kubesim
}

# kubesim is rebuilt alone when its sources change (cheap: the packages it
# shares with the release are in Go's build cache).
ensure_kubesim() {
	local out=$PWD/build/k8s/$K8S_RELEASE_DEFAULT/kubesim
	if [ ! -x "$out" ] || [ -n "$(find tests/e2e/cmd/kubesim tests/e2e/go.mod -newer "$out" -print -quit)" ]; then
		(cd tests/e2e && go build -trimpath -o "$out" ./cmd/kubesim) || die "building kubesim failed"
	fi
}
