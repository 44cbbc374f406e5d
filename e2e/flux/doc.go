// Package flux is Landform's end-to-end suite against the embedded
// environment (internal/devenv, as `landform dev` runs it): the real Flux
// source-, kustomize- and notification-controller, real git pushes to the dev git
// server, the stand-in cloud and the Landform controller with local runners.
// TestMain starts one environment for every scenario; each scenario works in
// its own namespace with its own git repository. See ../README.md.
package flux
