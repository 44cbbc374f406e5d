// Package outcometest holds what tests of packages that return outcomes
// (internal/inputs, internal/stateguard) check them with.
package outcometest

import (
	"github.com/onsi/gomega"

	"github.com/landform-dev/landform/internal/outcome"
)

// Expect checks that err is an outcome of kind and reason whose message
// says each of says.
func Expect(g gomega.Gomega, err error, kind outcome.Kind, reason string, says ...string) {
	g.ExpectWithOffset(2, err).To(gomega.HaveOccurred())
	o := outcome.Of(err, "")
	g.ExpectWithOffset(2, o.Kind).To(gomega.Equal(kind), err.Error())
	g.ExpectWithOffset(2, o.Reason).To(gomega.Equal(reason), err.Error())
	for _, s := range says {
		g.ExpectWithOffset(2, err.Error()).To(gomega.ContainSubstring(s))
	}
}
