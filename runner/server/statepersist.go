package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/internal/tfstate"
	"github.com/landform-dev/landform/runner"
)

// erroredStateFile is where the engine writes, in its working directory,
// the state of an apply or destroy it could not write to the backend. The
// runner keeps it as runner.KeptStateFile in its work directory. One the
// module's tarball holds is removed when it is extracted
// (removeShippedStates), so any found in the tree is the engine's.
const erroredStateFile = "errored.tfstate"

// persistBackoff spaces the runner's attempts to write a kept state: from
// a second, doubling up to fifteen, so that the state reaches the backend
// at most fifteen seconds after the API server answers again.
var persistBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 15 * time.Second}

// saveErroredState follows an apply or destroy (cmd) that ended with
// engineErr. When the engine could not write the state to the backend, it
// wrote it to errored.tfstate instead: planning from the backend's state
// now would create again what the apply created. The runner keeps that
// state, hands it to every watch (the controller keeps a copy that
// outlives the runner) and writes it to the backend itself, retrying with
// backoff until it succeeds or the run's deadline passes; the run ends
// only then, still holding its state lock. It returns engineErr without
// the engine's complaint about the state once the state is written (nil
// when that was its only error), or STATE_UNSAVED.
func (s *Server) saveErroredState(ctx context.Context, ws *workspace, r *run, cmd string, engineErr error) error {
	errored := filepath.Join(ws.moduleDir, erroredStateFile)
	data, err := os.ReadFile(errored)
	if errors.Is(err, os.ErrNotExist) {
		return engineErr
	}
	if err != nil {
		return internalError("read "+erroredStateFile, err)
	}
	kept := filepath.Join(s.workDir, runner.KeptStateFile)
	if err := writePrivate(kept, data); err != nil {
		return internalError("keep "+erroredStateFile, err)
	}
	// A later engine run in this directory must not find it: the kept
	// copy is the one that counts.
	_ = os.Remove(errored)
	what := "the state"
	if id, err := tfstate.ReadIdentity(data); err == nil {
		what = "the state (" + id.String() + ")"
	}
	r.log(fmt.Sprintf("Landform keeps %s that terraform %s could not write to the backend, and writes it there itself until the run's deadline.", what, cmd))
	r.keepState(data)
	if err := s.pushKeptState(ctx, ws, r, data); err != nil {
		return err
	}
	_ = os.Remove(kept)
	r.stateSaved()
	return withoutPersistErrors(engineErr)
}

// pushKeptState writes data to the backend, retrying until it is written,
// the backend refuses it, or ctx (the run's deadline) ends.
func (s *Server) pushKeptState(ctx context.Context, ws *workspace, r *run, data []byte) error {
	push := s.pushToStateSecret
	if ws.customBackend != "" {
		push = s.pushWithEngine
	}
	attempts := 0
	var last error
	err := persistBackoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		attempts++
		err := push(ctx, ws, r, data)
		switch {
		case err == nil:
			return true, nil
		case tfstate.IsRefused(err):
			return false, err
		case ctx.Err() != nil:
			return false, nil
		}
		last = err
		r.log(fmt.Sprintf("Landform could not write the kept state to the backend yet (attempt %d): %s", attempts, redact(err.Error(), ws.secrets)))
		return false, nil
	})
	switch {
	case err == nil:
		r.log(fmt.Sprintf("Landform wrote the kept state to the backend (attempt %d).", attempts))
		return nil
	case tfstate.IsRefused(err):
		msg := "the backend refused the state terraform could not save: " + redact(err.Error(), ws.secrets) +
			"; the runner and the controller keep it until a person decides (`landform state push`)"
		r.log("Landform: " + msg + ".")
		return newError(codes.FailedPrecondition, runner.ReasonStateUnsaved, msg, nil)
	}
	msg := fmt.Sprintf("terraform could not write the state to the backend, nor could Landform in %d attempts before the run's deadline", attempts)
	if last != nil {
		msg += " (last: " + redact(last.Error(), ws.secrets) + ")"
	}
	r.log("Landform: " + msg + "; the state is kept, and written before the next run.")
	return newError(codes.Unavailable, runner.ReasonStateUnsaved, msg, nil)
}

// pushToStateSecret writes data into the kubernetes backend's state Secret
// (tfstate.Push says why not with `tofu state push`) under the state lock
// the run took before the engine ran: -force is never needed, since the
// engine raised the serial before the write that failed, and under that
// lock nobody else wrote the state since. Should the lock have been
// released behind the run's back (a person's force-unlock), the state is
// written only while the lock is free, with the checks `state push` makes.
func (s *Server) pushToStateSecret(ctx context.Context, ws *workspace, r *run, data []byte) error {
	c, ns, err := s.stateClient(ws)
	if err != nil {
		return err
	}
	secret := statelock.StateSecretName(ws.workspace, ws.backendConfig["secret_suffix"])
	held := false
	if r.lockID != "" {
		info, err := statelock.Read(ctx, c.Leases(ns), statelock.LeaseName(secret))
		if err != nil {
			return err
		}
		switch {
		case info != nil && info.ID != r.lockID:
			return tfstate.Refused("the state lock this run took (%s) was released, and %s holds the lock now (lock %s)", r.lockID, info.Who, info.ID)
		case info != nil:
			held = true
		}
	}
	_, err = tfstate.Push(ctx, c.Secrets(ns), secret, data, tfstate.PushOptions{HeldSinceApply: held})
	return err
}

// pushWithEngine runs `state push` for a custom backend, whose state
// Landform does not know how to write: the engine takes the backend's lock
// for it (terraform-exec's StatePush does not, unless told). It cannot
// push an OpenTofu-encrypted state (see tfstate.Push): that one is kept
// for a person.
func (s *Server) pushWithEngine(ctx context.Context, ws *workspace, _ *run, _ []byte) error {
	err := engineResult(ctx, ws.tf.StatePush(ctx, filepath.Join(s.workDir, runner.KeptStateFile), tfexec.Lock(true), tfexec.LockTimeout("0s")))
	if err == nil {
		return nil
	}
	msg := terraformMessage(err)
	flat := strings.Join(strings.Fields(msg), " ")
	for _, refusal := range []string{
		"Failed to read source state",
		"cannot import state with lineage",
		"cannot import state with serial",
		"with a different state that has the same serial",
	} {
		if strings.Contains(flat, refusal) {
			return tfstate.Refused("terraform state push: %s", flat)
		}
	}
	return err
}

// The engine's diagnostics about a state it could not write, which the
// runner wrote since.
var persistDiagnostics = []string{"Error: Failed to save state", "Error: Failed to persist state to backend"}

// withoutPersistErrors is the engine's failure without its diagnostics
// about the state it could not write: nil when it had no other error (the
// apply did all it planned), else the rest of its stderr, classified as
// any failure is.
func withoutPersistErrors(err error) error {
	var exit *engineExit
	if !errors.As(err, &exit) {
		return err
	}
	var kept []string
	others := false
	skipping := false
	for _, line := range strings.Split(exit.stderr, "\n") {
		if strings.HasPrefix(line, "Error: ") || strings.HasPrefix(line, "Warning: ") {
			skipping = false
			for _, d := range persistDiagnostics {
				skipping = skipping || strings.HasPrefix(line, d)
			}
			others = others || !skipping && strings.HasPrefix(line, "Error: ")
		}
		if !skipping {
			kept = append(kept, line)
		}
	}
	if !others {
		return nil
	}
	return &engineExit{code: exit.code, stderr: strings.Join(kept, "\n")}
}
