# The container image's tools and the facts its builder (scripts/image) and its
# smoke test (tests/image/test_image.py) share. Sourced after common.sh, by
# scripts/image and by ./scripts/test's install step. Not run.
#
# The image is built without a Docker engine, which these machines lack: umoci
# writes the OCI image layout, skopeo copies it (into an archive or a
# registry), and bubblewrap runs its entry point the way a runtime would. All
# three are Debian packages and work without root.

# ca-certificates is not a tool: its bundle goes into the image.
IMAGE_TOOLS=(umoci skopeo bubblewrap ca-certificates)

# The image's only account. 65532 is the "nonroot" uid distroless images use,
# above any uid a distribution hands out, so it owns nothing on a host that
# mounts a volume into the container.
IMAGE_UID=65532
IMAGE_USER=troupe

# Install the image tools that are missing (as ensure_deps does for the build).
ensure_image_tools() {
	local missing=() p
	for p in "${IMAGE_TOOLS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing ${missing[*]} (the container image's tools)"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}
