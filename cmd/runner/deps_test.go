package main

import (
	"os/exec"
	"strings"
	"testing"
)

// A runner starts for every run, and initialises every package it links
// at each start. controller-runtime's client took about 3 ms of that
// (statelock.GetPod keeps it out of statelock, which the runner links);
// client-go's clientset, with every API group's types and typed client,
// about 12 ms of 33 (runner/internal/kubeclient reaches the state's
// Secret and Lease instead, with their two groups only).
func TestLinksNoControllerRuntimeNorClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	groups := 0
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/"),
			pkg == "k8s.io/client-go/kubernetes", strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/"):
			t.Errorf("the runner links %s", pkg)
		case strings.HasPrefix(pkg, "k8s.io/api/"):
			groups++
		}
	}
	if groups != 2 {
		t.Errorf("the runner links %d API groups' types, want 2 (core/v1 and coordination/v1)", groups)
	}
}
