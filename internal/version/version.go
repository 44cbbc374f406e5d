// Package version holds the build's version, set by the Makefile's -ldflags.
package version

// Version of Landform's binaries.
var Version = "dev"
