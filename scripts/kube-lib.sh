# Shared shell functions of the cluster test tier (scripts/kube-*; sourced
# after scripts/lib.sh). See docs/KUBERNETES.md, "Cluster tier".

KUBE_TOOLS="$here/kube/tools"
KUBE_VERSION=v1.37.2
RUNSC_VERSION=$(sed -n 's/^const RunscVersion = "\(.*\)"$/\1/p' "$here/internal/version/version.go")

# kube_build_key hashes everything the binaries are built from: the pinned
# modules, the patch, the pause source and the pinned gVisor.
kube_build_key() {
	(
		cd "$KUBE_TOOLS"
		find . -type f \( -name go.mod -o -name go.sum -o -name '*.sed' -o -name '*.c' \) | LC_ALL=C sort |
			xargs sha256sum
		echo "runsc $RUNSC_VERSION"
		echo "go $(go env GOVERSION)"
	) | sha256sum | cut -c1-16
}

# kube_cache_root is next to the Go build cache, so one cache directory
# (kept between CI runs) holds both.
kube_cache_root() {
	echo "${LAZARET_KUBE_CACHE:-$(dirname "$(go env GOCACHE)")/lazaret-kube}"
}

kube_bin_dir() {
	echo "$(kube_cache_root)/$(kube_build_key)/bin"
}

# The cluster's state, all under one directory (scripts/kube-cluster).
KUBE_STATE=${LAZARET_KUBE_STATE:-/var/lib/lazaret-kube}
KUBE_API_PORT=${LAZARET_KUBE_API_PORT:-16443}
KUBE_ETCD_PORT=${LAZARET_KUBE_ETCD_PORT:-23790}
KUBE_KUBELET_PORT=${LAZARET_KUBE_KUBELET_PORT:-10250}
# The pods' bridge and addresses: names and a range nothing else here uses.
KUBE_BRIDGE=lzkube0
KUBE_POD_CIDR=10.244.77.0/24
# The in-tree hostPath provisioner (kube-controller-manager
# --enable-hostpath-provisioner) makes each PV under this fixed path
# (pkg/volume/hostpath: /tmp/hostpath_pv/<uuid>) and deletes it with its
# PV; the cluster's default StorageClass uses it.
KUBE_PV_ROOT=/tmp/hostpath_pv
KUBE_STORAGE_CLASS=lazaret-hostpath
KUBE_SERVICE_CIDR=10.96.77.0/24
# The cgroup (in every v1 hierarchy and the unified one) that holds the
# pods (kubelet's cgroupRoot) and the one that holds our daemons: every
# process the cluster starts lives under one of them, so `down` can find
# them all without guessing by name.
KUBE_CGROUP=lazaret-kube
KUBE_DAEMON_CGROUP=lazaret-kube-daemons
KUBE_PAUSE_IMAGE=localhost/lazaret-kube-pause:1
KUBE_TEST_IMAGE=localhost/lazaret-kube-busybox:1

# docker_archive NAME OUT ROOTFS ENTRYPOINT... writes ROOTFS as a one-layer
# docker-archive image (what `ctr images import` and `podman load` read):
# no registry is reachable here, so images are made from local files.
docker_archive() {
	local name=$1 out=$2 rootfs=$3
	shift 3
	local work entry layer_sum cfg cfg_sum
	work=$(mktemp -d)
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
	layer_sum=$(sha256sum "$work/layer.tar" | cut -c1-64)
	mkdir "$work/$layer_sum"
	mv "$work/layer.tar" "$work/$layer_sum/layer.tar"
	entry=$(printf '"%s",' "$@")
	cfg=$(printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":[%s],"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "${entry%,}" "$layer_sum")
	cfg_sum=$(printf '%s' "$cfg" | sha256sum | cut -c1-64)
	printf '%s' "$cfg" >"$work/$cfg_sum.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg_sum" "$name" "$layer_sum" >"$work/manifest.json"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work" -cf "$out" manifest.json "$cfg_sum.json" "$layer_sum"
	rm -rf "$work"
}
