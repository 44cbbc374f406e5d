// Package e2e holds Landform's end-to-end scenarios. They run against any
// cluster given by LANDFORM_E2E_KUBECONFIG on which Landform's chart and
// Flux's source-controller are installed, and are skipped without it; see
// README.md. e2e/kind/run.sh prepares such a cluster with kind.
package e2e
