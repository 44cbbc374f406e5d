package server

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/landform-dev/landform/runner"
)

// maxMessageBytes bounds status messages: they travel in a gRPC header and
// end up in conditions and events.
const maxMessageBytes = 4 << 10

// newError builds a gRPC status error with an ErrorInfo detail.
func newError(code codes.Code, reason, msg string, metadata map[string]string) error {
	st := status.New(code, trimMessage(msg))
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason,
		Domain:   runner.ErrorDomain,
		Metadata: metadata,
	})
	if err != nil {
		// Only fails when the detail cannot be marshalled; the code
		// alone still says enough.
		return st.Err()
	}
	return withInfo.Err()
}

func internalError(msg string, err error) error {
	// Internal errors come from the runner's own file system and never
	// contain values from the workspace, only paths.
	return newError(codes.Internal, runner.ReasonInternal, msg+": "+err.Error(), nil)
}

func trimMessage(msg string) string {
	msg = strings.TrimSpace(msg)
	if len(msg) <= maxMessageBytes {
		return msg
	}
	cut := maxMessageBytes
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "\n... (truncated)"
}
