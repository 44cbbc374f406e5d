package runner

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the ErrorInfo domain of every typed runner error.
const ErrorDomain = "runner.landform.dev"

// Reasons carried in the ErrorInfo of a runner error. The controller decides
// what to do next from the reason, never from the message.
const (
	// ReasonStateLocked (codes.Aborted): another operation holds the state
	// lock. Metadata: id, who, operation, created; and holder, the encoded
	// statelock.Holder, when the lock is a Landform runner's.
	ReasonStateLocked = "STATE_LOCKED"
	// ReasonInvalidConfiguration (codes.InvalidArgument): the module or its
	// inputs are invalid; retrying without a change cannot succeed.
	ReasonInvalidConfiguration = "INVALID_CONFIGURATION"
	// ReasonMissingVariable (codes.InvalidArgument): a required variable has
	// no value.
	ReasonMissingVariable = "MISSING_VARIABLE"
	// ReasonImportUnsupported (codes.FailedPrecondition): the workspace
	// spec has imports, and the engine has no import blocks (Terraform
	// before 1.5); only another engine (OpenTofu, Terraform 1.5 or later)
	// or no imports helps.
	ReasonImportUnsupported = "IMPORT_UNSUPPORTED"
	// ReasonEngineVerificationFailed (codes.FailedPrecondition): the engine
	// version the run asks for was downloaded and did not verify (checksum
	// or signature); nothing ran.
	ReasonEngineVerificationFailed = "ENGINE_VERIFICATION_FAILED"
	// ReasonEngineUnavailable (codes.FailedPrecondition): the engine version
	// the run asks for is neither installed nor to be had from its source;
	// the message says which version, from where, and how to provide it.
	ReasonEngineUnavailable = "ENGINE_UNAVAILABLE"
	// ReasonStalePlan (codes.FailedPrecondition): the state changed after the
	// plan was made; plan again.
	ReasonStalePlan = "STALE_PLAN"
	// ReasonDigestMismatch (codes.InvalidArgument): the tarball does not
	// match the digest in its spec.
	ReasonDigestMismatch = "DIGEST_MISMATCH"
	// ReasonInvalidPath (codes.InvalidArgument): the module path escapes the
	// tarball or does not exist in it.
	ReasonInvalidPath = "INVALID_PATH"
	// ReasonNoWorkspace (codes.FailedPrecondition): an operation came before
	// UploadWorkspace.
	ReasonNoWorkspace = "NO_WORKSPACE"
	// ReasonTerraformFailed (codes.Unknown): terraform failed for another
	// reason (provider or API errors, ...); retry with backoff.
	ReasonTerraformFailed = "TERRAFORM_FAILED"
	// ReasonInterrupted (codes.Unavailable): the run was cancelled
	// (CancelRun), or the runner is shutting down and interrupted
	// terraform, or refuses new work.
	ReasonInterrupted = "INTERRUPTED"
	// ReasonInternal (codes.Internal): the runner itself failed (disk, I/O).
	ReasonInternal = "INTERNAL"
	// ReasonPlanUnusable (codes.FailedPrecondition): the saved plan cannot
	// be applied as it is (another engine version, a dependency lock file
	// that does not match, an unreadable plan file); plan again.
	ReasonPlanUnusable = "PLAN_UNUSABLE"
	// ReasonDeadlineExceeded (codes.DeadlineExceeded): the run ran out of
	// its phase's deadline, which the runner enforces itself: terraform
	// was interrupted (SIGINT, then killed after the interrupt grace).
	ReasonDeadlineExceeded = "DEADLINE_EXCEEDED"
	// ReasonUnknownRun (codes.NotFound): the runner has no run of that id.
	ReasonUnknownRun = "UNKNOWN_RUN"
	// ReasonRunnerBusy (codes.FailedPrecondition): another run is in
	// progress on this runner.
	ReasonRunnerBusy = "RUNNER_BUSY"
	// ReasonNotRecyclable (codes.FailedPrecondition): the runner cannot be
	// made ready for another object's runs (Recycle): it is not process 1
	// of its PID namespace, another process would not end, or a directory
	// would not empty. It is unchanged.
	ReasonNotRecyclable = "NOT_RECYCLABLE"
	// ReasonStateUnsaved: an apply or destroy could not write the state
	// to the backend, and neither could the runner before the run's
	// deadline (codes.Unavailable) or at all, because the backend refused
	// it (codes.FailedPrecondition: another lineage, a newer serial). The
	// run's watches received the state (RunEvent.unsaved_state_chunk);
	// the runner keeps it too. Planning from the backend's state now
	// would create again what the apply created.
	ReasonStateUnsaved = "STATE_UNSAVED"
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
