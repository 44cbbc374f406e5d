// Package cluster is the end-to-end suite on a real single-node Kubernetes
// cluster of this machine (`make cluster-up`, then `make e2e-cluster`):
// Landform installed with its Helm chart, runner Pods started by a real
// kubelet under containerd and runc, reached over the Pod network. Without
// LANDFORM_CLUSTER_KUBECONFIG every test skips. See README.md here.
package cluster
