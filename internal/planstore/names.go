package planstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxName is the longest Secret name; maxIndex leaves room for "-<i>" up
// to six digits (a 500 GiB plan).
const (
	maxName  = 253
	maxIndex = 7
)

// chunkPrefix is "tfplan-<owner>-", cut and suffixed with a hash when the
// owner's name is too long for the result to stay a valid Secret name.
func chunkPrefix(owner string) string {
	p := "tfplan-" + owner
	if len(p) > maxName-maxIndex {
		sum := sha256.Sum256([]byte(owner))
		h := hex.EncodeToString(sum[:])[:8]
		p = strings.TrimRight(p[:maxName-maxIndex-len(h)-1], "-.") + "-" + h
	}
	return p + "-"
}

func chunkName(owner string, i int) string {
	return chunkPrefix(owner) + strconv.Itoa(i)
}

// chunkIndex returns i if name is chunk i of owner's plan.
func chunkIndex(owner, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, chunkPrefix(owner))
	if !ok || rest == "" {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}
