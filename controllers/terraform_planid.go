package controllers

import (
	"strings"
)

const shortLen = 10

// planID names a plan after the revision it was made from and the digest of
// its changes (not of the plan file): an identical re-plan keeps its id and
// therefore its approval, and a different plan never inherits one.
func planID(revision, changesDigest string) string {
	return "plan-" + shortRevision(revision) + "-" + short(strings.ToLower(changesDigest))
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
