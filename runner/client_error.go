package runner

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed runner call: its gRPC code and, for typed failures, the
// Reason* constant and its metadata (the lock holder for STATE_LOCKED).
type Error struct {
	Code     codes.Code
	Reason   string
	Message  string
	Metadata map[string]string
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("runner: %s: %s", e.Reason, e.Message)
	}
	return fmt.Sprintf("runner: %s: %s", e.Code, e.Message)
}

// GRPCStatus lets status.Code and status.FromError see through an Error.
func (e *Error) GRPCStatus() *status.Status {
	return status.New(e.Code, e.Message)
}

// AsError returns err as an *Error when it is, or wraps, a runner Error or
// a gRPC status. Reason is empty for a status without ErrorInfo (a
// cancelled call, an unreachable runner).
func AsError(err error) (*Error, bool) {
	if err == nil {
		return nil, false
	}
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	e = &Error{Code: st.Code(), Message: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			e.Reason = info.GetReason()
			e.Metadata = info.GetMetadata()
			break
		}
	}
	return e, true
}

// IsReason reports whether err is a runner error with this reason.
func IsReason(err error, reason string) bool {
	e, ok := AsError(err)
	return ok && e.Reason == reason
}

// toError converts a gRPC error from a call into an *Error.
func toError(err error) error {
	if e, ok := AsError(err); ok {
		return e
	}
	return err
}
