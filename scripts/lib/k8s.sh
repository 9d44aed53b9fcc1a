# Build the real Kubernetes components troupe's end-to-end tests run against:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd,
# from their own Go modules through the module proxy, plus the rig's kubesim
# podresources (the kubelet's PodResources server, for troupe-node's tests) and
# devicemanager (the kubelet's device manager, for troupe-node's device plugin).
# Sourced after common.sh. Go is test tooling only; the daemon stays C.
#
# The binaries are cached in build/k8s/<release>/, keyed by the module's
# go.mod and go.sum: a second run rebuilds nothing. Go's own module and build
# caches stay in their default places (go env GOMODCACHE GOCACHE).
#
# helm, which the chart test runs (tests/e2e/test_e2e_chart.py), is built the
# same way from its own module, tests/tools/helm, into build/helm/<version>/;
# ensure_k8s ends with it, so whatever builds the cluster builds helm too.

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
	ensure_podresources
	ensure_devicemanager
	ensure_helm
	ensure_kueue
}

# kubesim is rebuilt alone when its sources change (cheap: the packages it
# shares with the release are in Go's build cache).
ensure_kubesim() {
	local out=$PWD/build/k8s/$K8S_RELEASE_DEFAULT/kubesim
	if [ ! -x "$out" ] || [ -n "$(find tests/e2e/cmd/kubesim tests/e2e/go.mod -newer "$out" -print -quit)" ]; then
		(cd tests/e2e && go build -trimpath -o "$out" ./cmd/kubesim) || die "building kubesim failed"
	fi
}

# podresources, the kubelet's own PodResources gRPC server answering from a
# file (tests/e2e/cmd/podresources), is rebuilt alone the same way: its
# Kubernetes packages are in Go's build cache once the release is built.
ensure_podresources() {
	local out=$PWD/build/k8s/$K8S_RELEASE_DEFAULT/podresources
	if [ ! -x "$out" ] || [ -n "$(find tests/e2e/cmd/podresources tests/e2e/go.mod tests/e2e/go.sum \
		-newer "$out" -print -quit)" ]; then
		(cd tests/e2e && go build -trimpath -o "$out" ./cmd/podresources) || die "building podresources failed"
	fi
}

# devicemanager, the kubelet's own device manager with its PodResources server
# answering from it, driven by JSON commands on stdin (tests/e2e/cmd/
# devicemanager; troupe-node's device plugin is tested against it), the same way.
ensure_devicemanager() {
	local out=$PWD/build/k8s/$K8S_RELEASE_DEFAULT/devicemanager
	if [ ! -x "$out" ] || [ -n "$(find tests/e2e/cmd/devicemanager tests/e2e/go.mod tests/e2e/go.sum \
		-newer "$out" -print -quit)" ]; then
		(cd tests/e2e && go build -trimpath -o "$out" ./cmd/devicemanager) || die "building devicemanager failed"
	fi
}

# The Kueue version tests/tools/kueue/go.mod pins.
kueue_version() {
	awk '$1 == "sigs.k8s.io/kueue" { print $2 }' tests/tools/kueue/go.mod
}

# ensure_kueue: build Kueue's controller manager into build/kueue/<version>/kueue
# unless the one there was built from the same go.mod and go.sum; its module
# (CRDs, webhook manifests) is then in Go's module cache, where the e2e rig
# reads them (go mod download prints the folder into build/kueue/<version>/dir).
ensure_kueue() {
	local mod=tests/tools/kueue version out want log start=$SECONDS
	version=$(kueue_version)
	[ -n "$version" ] || die "$mod/go.mod names no sigs.k8s.io/kueue version"
	out=$PWD/build/kueue/$version
	want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
	if [ -x "$out/kueue" ] && [ -d "$(cat "$out/dir" 2>/dev/null)" ] &&
		[ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	ensure_go
	mkdir -p "$out"
	rm -f "$out/.stamp"
	log=$out/build.log
	say "building Kueue $version from $mod/go.mod; the first build takes a few minutes"
	# One line differs from the module: the metrics server's certificate
	# folder, which cmd/kueue/main.go fixes at /etc/kueue/metrics/certs when
	# Kueue does not make its own certificates, is read from
	# KUEUE_METRICS_CERT_DIR, so the rig writes nothing outside build/. The
	# main package (one file, no internal imports) is built from a copy with
	# that line changed, in a copy of this module; every other package is the
	# module's own, at the versions go.sum pins.
	if ! (cd "$mod" &&
		go mod download -json sigs.k8s.io/kueue | awk -F'"' '$2 == "Dir" { print $4 }' \
			>"$out/dir" &&
		rm -rf "$out/src" && mkdir -p "$out/src" && cp go.mod go.sum "$out/src/" &&
		main="$(cat "$out/dir")/cmd/kueue/main.go" &&
		sed 's|metricsCertPath := "/etc/kueue/metrics/certs"|metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR")|' \
			"$main" >"$out/src/main.go" &&
		! cmp -s "$main" "$out/src/main.go" &&
		cd "$out/src" && go build -trimpath -ldflags "-s -w" -o "$out/kueue" .) \
		>"$log" 2>&1; then
		cat "$log" >&2
		die "building Kueue $version failed; see $log"
	fi
	echo "$want" >"$out/.stamp"
	say "built Kueue $version in $((SECONDS - start)) s"
}

# The helm version tests/tools/helm/go.mod pins.
helm_version() {
	awk '$1 == "helm.sh/helm/v3" { print $2 }' tests/tools/helm/go.mod
}

# ensure_helm: build helm into build/helm/<version>/helm unless the one there
# was built from the same go.mod and go.sum. A module of its own, so a helm bump
# never rebuilds the Kubernetes binaries (whose stamp hashes tests/e2e/go.mod).
ensure_helm() {
	local mod=tests/tools/helm version out want client minor log start=$SECONDS
	version=$(helm_version)
	[ -n "$version" ] || die "$mod/go.mod names no helm.sh/helm/v3 version"
	out=$PWD/build/helm/$version
	want=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
	if [ -x "$out/helm" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	ensure_go
	mkdir -p "$out"
	rm -f "$out/.stamp"
	log=$out/build.log
	# helm's own Makefile stamps its version, and the Kubernetes version that
	# `helm template` and `helm lint` assume (without it: v1.20, which a chart's
	# kubeVersion constraint refuses), from the client-go it is built with.
	client=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$mod/go.mod")
	minor=$(echo "$client" | cut -d. -f2)
	local x="-X helm.sh/helm/v3/internal/version.version=$version"
	x="$x -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
	x="$x -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
	say "building helm $version from $mod/go.mod; the first build takes a few minutes"
	if ! (cd "$mod" && go build -trimpath -ldflags "-s -w $x" -o "$out/" tool) >"$log" 2>&1; then
		cat "$log" >&2
		die "building helm $version failed; see $log"
	fi
	echo "$want" >"$out/.stamp"
	say "built helm $version in $((SECONDS - start)) s"
}
