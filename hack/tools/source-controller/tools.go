//go:build tools

// Package tools pins Flux's source-controller for `landform dev` and the e2e suites.
package tools

import _ "github.com/fluxcd/source-controller"
