package main

import (
	"os/exec"
	"strings"
	"testing"
)

// A runner starts for every run, and initialises every package it links
// at each start. controller-runtime's client took about 3 ms of that
// (statelock.GetPod keeps it out of statelock, which the runner links);
// the runner reaches the API server with client-go alone.
func TestLinksNoControllerRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/") {
			t.Errorf("the runner links %s", pkg)
		}
	}
}
