package tfstate

import "fmt"

// SeedAnnotation marks a state Secret that Landform created holding an
// empty state; its value is that state's lineage. The kubernetes backend,
// finding a Secret without a state, would lock, write an empty state and
// unlock on the first init: three writes where creating the Secret with
// one is none. A runner whose module may encrypt its state removes the
// seed while it is untouched (IsSeed), since an enforced encryption
// refuses a plain state, and leaves the new state to the engine.
const SeedAnnotation = "infra.landform.dev/seed-lineage"

// Empty is a state of lineage holding nothing, as the engine writes for a
// new workspace, gzip'd as the backend keeps it.
func Empty(lineage string) []byte {
	return Compress([]byte(fmt.Sprintf(`{"version":4,"serial":0,"lineage":%q,"outputs":{},"resources":[],"check_results":null}`, lineage)))
}

// IsSeed reports whether data is still the empty state Empty(lineage)
// made: serial 0 of that lineage, holding nothing.
func IsSeed(data []byte, lineage string) bool {
	h, ok := plainHeader(data)
	return ok && lineage != "" && h.Lineage == lineage && h.Serial == 0 && len(h.Resources) == 0 && len(h.Outputs) == 0
}

// HoldsResources reports whether the state kept in a state Secret's
// DataKey may hold resources: false for no state and for a plain state
// that lists none (nothing to destroy), true for any other, an encrypted
// one included.
func HoldsResources(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	h, ok := plainHeader(data)
	return !ok || len(h.Resources) > 0
}

// plainHeader reads a gzip'd plain state's header; ok is false for
// anything else (encrypted, not gzip'd, not a state).
func plainHeader(data []byte) (header, bool) {
	raw, err := Decompress(data)
	if err != nil {
		return header{}, false
	}
	h, err := readHeader(raw)
	if err != nil || len(h.EncryptedData) > 0 {
		return header{}, false
	}
	return h, true
}
