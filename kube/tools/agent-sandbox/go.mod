// Module kube/tools/agent-sandbox pins the kubernetes-sigs/agent-sandbox
// controller for the cluster test tier.
module github.com/lazaret-dev/lazaret/kube/tools/agent-sandbox

go 1.26.0

require sigs.k8s.io/agent-sandbox v1.0.1
