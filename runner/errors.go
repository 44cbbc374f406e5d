package runner

import (
	"strings"
	"unicode/utf8"

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
)

// maxMessageBytes bounds status messages: they travel in a gRPC header and
// end up in conditions and events.
const maxMessageBytes = 4 << 10

// newError builds a gRPC status error with an ErrorInfo detail.
func newError(code codes.Code, reason, msg string, metadata map[string]string) error {
	st := status.New(code, trimMessage(msg))
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reason,
		Domain:   ErrorDomain,
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
	return newError(codes.Internal, ReasonInternal, msg+": "+err.Error(), nil)
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
