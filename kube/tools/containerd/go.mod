// Module kube/tools/containerd pins containerd (daemon, ctr, runc shim)
// for the cluster test tier.
module github.com/lazaret-dev/lazaret/kube/tools/containerd

go 1.26.6

require github.com/containerd/containerd/v2 v2.4.2
