// Module kube/tools/etcd pins etcd for the cluster test tier. The etcd
// server's own go.mod replaces its sibling modules with local paths, so it
// is built from here with every sibling at the same release.
module github.com/lazaret-dev/lazaret/kube/tools/etcd

go 1.26.0

require (
	go.etcd.io/etcd/api/v3 v3.7.3
	go.etcd.io/etcd/client/pkg/v3 v3.7.3
	go.etcd.io/etcd/client/v3 v3.7.3
	go.etcd.io/etcd/pkg/v3 v3.7.3
	go.etcd.io/etcd/server/v3 v3.7.3
)
