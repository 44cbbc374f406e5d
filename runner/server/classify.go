package server

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/landform-dev/landform/runner"
)

// terraformError turns a failed terraform command into a typed status.
// When validate is set and the text does not say why, `validate` decides
// whether the configuration is at fault (stalling) or something else
// (retryable).
func (s *Server) terraformError(ctx context.Context, ws *workspace, cmd string, err error, validate bool) error {
	if _, typed := runner.AsError(err); typed {
		// Decided already (a state the runner could not save).
		return err
	}
	if ctx.Err() != nil {
		return contextStatus(ctx)
	}
	msg := redact(terraformMessage(err), ws.secrets)
	code, reason, metadata := classify(msg)
	if reason == "" && validate && s.configurationInvalid(ctx, ws) {
		code, reason = codes.InvalidArgument, runner.ReasonInvalidConfiguration
	}
	if reason == "" {
		code, reason = codes.Unknown, runner.ReasonTerraformFailed
	}
	return newError(code, reason, "terraform "+cmd+": "+msg, metadata)
}

// configurationInvalid runs `validate` after a failure that the error text
// does not explain.
func (s *Server) configurationInvalid(ctx context.Context, ws *workspace) bool {
	out, err := ws.tf.Validate(ctx)
	return err == nil && !out.Valid
}

// terraformMessage extracts terraform's error text: its stderr, without a
// leading "exit status N" line.
func terraformMessage(err error) string {
	msg := err.Error()
	if first, rest, ok := strings.Cut(msg, "\n"); ok && strings.HasPrefix(first, "exit status") {
		msg = rest
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = err.Error()
	}
	return msg
}

// redact replaces secret values (the spec's environment) in text. A value
// with spaces may be wrapped over lines by terraform, so its words may be
// separated by any whitespace.
func redact(text string, secrets []string) string {
	for _, v := range secrets {
		words := strings.Fields(v)
		if len(words) <= 1 {
			text = strings.ReplaceAll(text, v, "(redacted)")
			continue
		}
		for i, w := range words {
			words[i] = regexp.QuoteMeta(w)
		}
		text = regexp.MustCompile(strings.Join(words, `\s+`)).ReplaceAllString(text, "(redacted)")
	}
	return text
}

// failureTexts are the failures the controller handles differently from a
// generic one, by the texts terraform says them with, checked in order.
var failureTexts = []struct {
	code   codes.Code
	reason string
	texts  []string
}{
	{codes.Aborted, runner.ReasonStateLocked, []string{"Error acquiring the state lock", "the state is already locked"}},
	{codes.FailedPrecondition, runner.ReasonStalePlan, []string{"Saved plan is stale"}},
	// The saved plan itself cannot be applied here: made by another
	// engine version, with other providers, against another state. Only
	// a new plan helps.
	{codes.FailedPrecondition, runner.ReasonPlanUnusable, []string{
		"Inconsistent dependency lock file",
		"Saved plan does not match the given state",
		"Failed to read plan from plan file",
		"plan file was created by",
		"plan files cannot be shared between different", "plan files cannot be transferred between different",
		"unsupported plan file format version",
	}},
	// Terraform before 1.5, at init or plan, which say so among "problems
	// with the configuration": checked first.
	{codes.FailedPrecondition, runner.ReasonImportUnsupported, []string{`Blocks of type "import" are not expected here`}},
	{codes.InvalidArgument, runner.ReasonMissingVariable, []string{"No value for required variable"}},
	{codes.InvalidArgument, runner.ReasonInvalidConfiguration, []string{
		"problems with the configuration",
		// An import's `to` names no resource of the module (OpenTofu,
		// Terraform), which validate does not check.
		"Configuration for import target does not exist", "Import block target does not exist",
		"Invalid value for variable", "Invalid value for input variable",
		"Invalid backend configuration",
	}},
}

// classify recognises the failures of failureTexts. Matching ignores line
// breaks: terraform wraps its text.
func classify(text string) (codes.Code, string, map[string]string) {
	flat := strings.Join(strings.Fields(text), " ")
	for _, f := range failureTexts {
		if !containsAny(flat, f.texts...) {
			continue
		}
		if f.reason == runner.ReasonStateLocked {
			return f.code, f.reason, parseLockInfo(text)
		}
		return f.code, f.reason, nil
	}
	return codes.OK, "", nil
}

// planLockUnusable turns an init failure caused by the dependency lock
// file an apply brought from its plan into PLAN_UNUSABLE: the plan's
// providers cannot be installed here (checksums for another platform, a
// version no longer available), so only a new plan helps. The same texts
// in a plan's init are the module's own lock file at fault, and stay as
// they are.
func planLockUnusable(err error) error {
	e, ok := runner.AsError(err)
	if !ok || e.Reason == runner.ReasonStateLocked || e.Reason == runner.ReasonInterrupted || e.Reason == runner.ReasonDeadlineExceeded {
		return err
	}
	flat := strings.Join(strings.Fields(e.Message), " ")
	if containsAny(flat,
		"checksums previously recorded in the dependency lock file",
		"is no longer available",
		"does not match configured version constraint") {
		return newError(codes.FailedPrecondition, runner.ReasonPlanUnusable, "the plan's dependency lock file cannot be used: "+e.Message, nil)
	}
	return err
}

func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

// parseLockInfo reads the "Lock Info:" block terraform prints when the state
// is locked by someone else.
func parseLockInfo(text string) map[string]string {
	keys := map[string]string{"ID": "id", "Who": "who", "Operation": "operation", "Created": "created", "Path": "path"}
	md := map[string]string{}
	sc := bufio.NewScanner(bytes.NewBufferString(text))
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !in {
			in = line == "Lock Info:"
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			break
		}
		if name, known := keys[strings.TrimSpace(k)]; known {
			md[name] = strings.TrimSpace(v)
		}
	}
	if len(md) == 0 {
		return nil
	}
	return md
}
