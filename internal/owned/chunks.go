package owned

import (
	"strconv"
	"strings"

	"github.com/landform-dev/landform/internal/names"
)

// maxIndex leaves room in a Secret name for "-<i>" up to six digits.
const maxIndex = 7

// chunkPrefix is "<kind>-<owner>-", cut and suffixed with a hash of the
// owner's name (names.Prefixed) when the result would be too long for a
// Secret name.
func chunkPrefix(kind, owner string) string {
	return names.Prefixed(kind+"-", owner, names.MaxName-maxIndex) + "-"
}

// ChunkName names chunk i of a payload Landform splits across Secrets for
// owner: "<kind>-<owner>-<i>" (tfplan, tfartifact), always a valid Secret
// name.
func ChunkName(kind, owner string, i int) string {
	return chunkPrefix(kind, owner) + strconv.Itoa(i)
}

// ChunkIndex returns i when name is ChunkName(kind, owner, i).
func ChunkIndex(kind, owner, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, chunkPrefix(kind, owner))
	if !ok || rest == "" {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}
