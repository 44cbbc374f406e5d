//go:build tools

// Package tools pins Flux's notification-controller for `landform dev` and the
// e2e suites (alerts on Terraform objects).
package tools

import _ "github.com/fluxcd/notification-controller"
