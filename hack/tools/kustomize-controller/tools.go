//go:build tools

// Package tools pins Flux's kustomize-controller for `landform dev` and the e2e suites.
package tools

import _ "github.com/fluxcd/kustomize-controller"
