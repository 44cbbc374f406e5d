package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/metrics"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
)

// Local runs each runner as a process on loopback, with the same protocol
// and mTLS as a Pod. Used by `--runner=local`, `landform dev` and tests.
//
// With Options.Detach (the controller binary) a runner outlives the
// controller, as a runner Pod does: a controller killed mid-apply leaves
// terraform running, and its successor finds the runner by the record in
// the runner's directory (runnerRecord), dials it with the same CA (which
// the caller keeps across restarts) and collects the run. Without it (the
// in-process controller of `landform dev` and tests) runners are children
// that end with the controller, which drains them first.
type Local struct {
	CA      *mtls.CA
	Options runner.LocalOptions
	// Kubeconfig is the file the runner's kubernetes backend reads.
	Kubeconfig string
	// Grace is how long a stopping runner may take to interrupt terraform.
	Grace time.Duration
}

// recordFile names a detached runner's record in its directory.
const recordFile = "runner.json"

// runnerRecord is what a successor needs to find and trust a detached
// runner: whose runner it is, where it listens, and the process (pid,
// start time, boot id) so that a reused pid is never taken for it.
type runnerRecord struct {
	Namespace string                  `json:"namespace"`
	Name      string                  `json:"name"`
	Run       string                  `json:"run"`
	Address   string                  `json:"address"`
	Started   time.Time               `json:"started"`
	Process   statelock.ProcessHolder `json:"process"`
}

func (l *Local) grace() time.Duration {
	if l.Grace == 0 {
		return 30 * time.Second
	}
	return l.Grace
}

// Start implements Placer.
func (l *Local) Start(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error) {
	started := time.Now()
	lr, err := runner.StartLocalRunner(ctx, l.CA, l.Options)
	if err != nil {
		return nil, fmt.Errorf("starting local runner: %w", err)
	}
	metrics.ObserveRunnerStart("local", time.Since(started))
	if l.Options.Detach {
		if err := l.record(lr, obj, runID, started); err != nil {
			_ = lr.Stop(l.grace())
			return nil, err
		}
	}
	return &Run{
		Client:      lr.Client,
		Backend:     map[string]string{"config_path": l.Kubeconfig},
		Identity:    fmt.Sprintf("local runner (pid %d)", lr.PID),
		stop:        lr.Stop,
		grace:       l.grace(),
		forgetState: lr.ForgetKeptState,
		alive: func(context.Context) (bool, string) {
			select {
			case <-lr.Exited():
				return false, fmt.Sprintf("local runner process %d exited", lr.PID)
			default:
				return true, ""
			}
		},
	}, nil
}

// record writes the runner's record, atomically, into its directory.
func (l *Local) record(lr *runner.LocalRunner, obj *infrav1.Terraform, runID string, started time.Time) error {
	proc, err := statelock.Process(lr.PID)
	if err != nil {
		return fmt.Errorf("identifying local runner process %d: %w", lr.PID, err)
	}
	b, err := json.Marshal(runnerRecord{Namespace: obj.Namespace, Name: obj.Name, Run: runID, Address: lr.Address, Started: started, Process: *proc})
	if err != nil {
		return err
	}
	tmp := filepath.Join(lr.Dir, recordFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("recording local runner: %w", err)
	}
	return os.Rename(tmp, filepath.Join(lr.Dir, recordFile))
}

// Attach implements Placer. A detached runner of obj that still runs is
// dialled: the one started for runID, else the object's newest (which
// serves an apply after its plan). Without Detach, runners end with the
// controller process that started them, so a run this process is not
// following has no runner any more.
func (l *Local) Attach(ctx context.Context, obj *infrav1.Terraform, runID string) (*Run, error) {
	if !l.Options.Detach {
		return nil, fmt.Errorf("%w: local runners end with the controller process that started them, and run %s is not running in this one "+
			"(an earlier process started it, or it ended and its result could not be recorded)", ErrRunnerGone, runID)
	}
	records, err := l.records()
	if err != nil {
		return nil, err
	}
	var found *localRecord
	for _, r := range records {
		if r.Namespace != obj.Namespace || r.Name != obj.Name {
			continue
		}
		if gone, _ := r.Process.Gone(); gone {
			continue
		}
		if found == nil || r.Run == runID || (found.Run != runID && r.Started.After(found.Started)) {
			found = r
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: no local runner of %s/%s runs any more (run %s)", ErrRunnerGone, obj.Namespace, obj.Name, runID)
	}
	c, err := runner.DialLocal(ctx, l.CA, found.Address)
	if err != nil {
		if gone, why := found.Process.Gone(); gone {
			return nil, fmt.Errorf("%w: %s", ErrRunnerGone, why)
		}
		return nil, fmt.Errorf("dialling local runner process %d: %w", found.Process.PID, err)
	}
	proc, dir, grace := found.Process, found.dir, l.grace()
	return &Run{
		Client:   c,
		Backend:  map[string]string{"config_path": l.Kubeconfig},
		Identity: fmt.Sprintf("local runner (pid %d)", proc.PID),
		grace:    grace,
		stop: func(grace time.Duration) error {
			c.Close()
			return stopProcess(&proc, dir, grace)
		},
		alive: func(context.Context) (bool, string) {
			gone, why := proc.Gone()
			return !gone, why
		},
	}, nil
}

// localRecord is a runner record and its directory.
type localRecord struct {
	runnerRecord
	dir string
}

// records reads the records of the detached runners under the work dir;
// a directory without a readable record is skipped.
func (l *Local) records() ([]*localRecord, error) {
	dirs, err := filepath.Glob(filepath.Join(l.Options.WorkDir, "landform-runner-*"))
	if err != nil {
		return nil, err
	}
	var out []*localRecord
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, recordFile))
		if err != nil {
			continue
		}
		r := &localRecord{dir: d}
		if json.Unmarshal(b, &r.runnerRecord) != nil || r.Process.PID <= 0 {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// stopProcess stops a detached runner that is not this process's child:
// SIGTERM (it interrupts terraform, which saves its state and releases its
// lock), SIGKILL after grace, and its directory removed once it is gone.
func stopProcess(p *statelock.ProcessHolder, dir string, grace time.Duration) error {
	if gone, _ := p.Gone(); !gone {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for {
			if gone, _ := p.Gone(); gone {
				break
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, err := runner.RemoveRunnerDir(dir)
	return err
}

// Durable implements Placer: detached runners outlive the controller,
// whose successor attaches to their runs; children end with it, and it
// drains them before it exits.
func (l *Local) Durable() bool { return l.Options.Detach }

// RemoveStale removes the directories of local runners that no longer
// run: children of earlier controller processes, and detached runners
// that exited (their idle exit, say). A state a runner kept unsaved stays
// (runner.RemoveRunnerDir), and is returned: `landform state push` is for
// it. Call it before the first Start.
func (l *Local) RemoveStale() (kept []string, err error) {
	if l.Options.WorkDir == "" {
		// Runners live in the system temp dir, beside everything else.
		return nil, nil
	}
	dirs, err := filepath.Glob(filepath.Join(l.Options.WorkDir, "landform-runner-*"))
	if err != nil {
		return nil, err
	}
	records, err := l.records()
	if err != nil {
		return nil, err
	}
	running := map[string]bool{}
	for _, r := range records {
		if gone, _ := r.Process.Gone(); !gone {
			running[r.dir] = true
		}
	}
	var errs []error
	for _, d := range dirs {
		if running[d] {
			continue
		}
		k, err := runner.RemoveRunnerDir(d)
		if k != "" {
			kept = append(kept, k)
		}
		errs = append(errs, err)
	}
	return kept, errors.Join(errs...)
}

// WriteKubeconfig writes cfg as a kubeconfig file readable only by its owner,
// so that local runners reach the same API server as the controller.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	cluster := &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	user := &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["landform"] = cluster
	kc.AuthInfos["landform"] = user
	kc.Contexts["landform"] = &clientcmdapi.Context{Cluster: "landform", AuthInfo: "landform"}
	kc.CurrentContext = "landform"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
