// Package packaging holds the tests of how Landform is installed and built:
// the Helm chart (charts/landform), the kustomize bases (config/), the
// Dockerfile, the pinned tools of hack/tools.sh and the e2e/kind script.
//
// Rendered manifests are applied with server-side dry run to a real
// kube-apiserver (envtest, with the Landform, Flux source and Prometheus
// Operator ServiceMonitor CRDs installed), so every object is checked
// against the real schemas and admission (Pod Security included).
//
// helm and kustomize come from $LANDFORM_HELM and $LANDFORM_KUSTOMIZE (set
// by `make test`), else the repository's bin/ (`make tools`); a missing tool
// fails the tests rather than skipping them.
package packaging
