//go:build tools

// Package tools pins Flux's helm-controller for the real-cluster e2e suite
// (the seeds' HelmRelease pattern).
package tools

import _ "github.com/fluxcd/helm-controller"
