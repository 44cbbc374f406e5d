package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

const shortLen = 10

// planMaterial is everything a plan was made from, and what it plans.
type planMaterial struct {
	// inputsDigest covers the artifact, path, variables, backend,
	// workspace and destroy flag.
	inputsDigest string
	// engine is the engine and its version.
	engine string
	// lockFile is the dependency lock file the plan was made with.
	lockFile []byte
	// stateDigest covers the state the plan was made against.
	stateDigest string
	// changesDigest covers the planned changes (not the plan file bytes).
	changesDigest string
	// applied is the id of the plan last applied before this one
	// (status.lastAppliedPlan). A state restored to what it was before
	// an apply, or drift back to it, plans the same changes from the
	// same state again: without it that plan would have the id of the
	// one applied, and the approval that named it would apply it a
	// second time, unseen. An approval is used once.
	applied string
	// failed is the id of the plan whose apply last failed or was lost
	// (status.lastFailedApplyPlan): that apply may have changed
	// resources the state does not show (a create interrupted before the
	// engine recorded it), so its approval is spent too.
	failed string
}

// planID names a plan after the revision it was made from and a digest of
// everything it was made from and plans: a re-plan against the same state
// and inputs that plans the same changes keeps its id, and with it its
// approval; a plan after an apply, or after any input changed (a
// workspace, a variable, the engine version, the dependency lock), gets a
// new one, and needs its own approval. A plan never has the id of a plan
// applied before it, nor that of one whose apply failed
// (planMaterial.applied, planMaterial.failed).
func planID(revision string, m planMaterial) string {
	h := sha256.New()
	lock := sha256.Sum256(m.lockFile)
	fmt.Fprintf(h, "inputs=%s\nengine=%s\nlock=%s\nstate=%s\nchanges=%s\n",
		m.inputsDigest, m.engine, hex.EncodeToString(lock[:]), m.stateDigest, strings.ToLower(m.changesDigest))
	if m.applied != "" {
		// Only then: an object that never applied keeps the ids it had.
		fmt.Fprintf(h, "after=%s\n", m.applied)
	}
	if m.failed != "" {
		fmt.Fprintf(h, "failed=%s\n", m.failed)
	}
	return "plan-" + shortRevision(revision) + "-" + short(hex.EncodeToString(h.Sum(nil)))
}

// shortRevision shortens Flux revisions such as "main@sha1:0a1b…",
// "sha256:…" or "v1.2.0@sha256:…" to the first characters of their hash.
func shortRevision(revision string) string {
	if i := strings.LastIndex(revision, ":"); i >= 0 {
		revision = revision[i+1:]
	}
	var b strings.Builder
	for _, c := range strings.ToLower(revision) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "0"
	}
	return short(b.String())
}

func short(s string) string {
	if len(s) > shortLen {
		return s[:shortLen]
	}
	return s
}
