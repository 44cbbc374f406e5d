// Command landform-runner serves the runner protocol for one workspace over
// mTLS until SIGTERM or SIGINT, then interrupts terraform gracefully so that
// it releases its state lock, and exits.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/statelock"
	"github.com/landform-dev/landform/runner"
	"github.com/landform-dev/landform/runner/server"
)

func main() {
	if err := run(); err != nil {
		slog.Error("runner failed", "error", err.Error())
		os.Exit(1)
	}
}

type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func run() error {
	var (
		listen      = flag.String("listen", ":9443", "address to listen on")
		addressFile = flag.String("address-file", "", "write the address actually listened on to this file (for --listen with port 0)")
		addressFD   = flag.Int("address-fd", 0, "write the address actually listened on to this inherited file descriptor, then close it (for --listen with port 0; how local runners tell their controller without it polling a file)")
		tlsCert     = flag.String("tls-cert", "", "server certificate (PEM)")
		tlsKey      = flag.String("tls-key", "", "server private key (PEM)")
		tlsClientCA = flag.String("tls-client-ca", "", "CA certificates that client certificates must chain to (PEM)")
		tlsClientCN = flag.String("tls-client-cn", "", "common name the client certificate must have (default: any issued by the client CA)")
		workDir     = flag.String("work-dir", filepath.Join(os.TempDir(), "landform-runner"), "directory for the workspace, HOME and the CLI configuration")
		engine      = flag.String("engine", "", "terraform or tofu binary (default: tofu on PATH, else terraform)")
		engineDir   = flag.String("engine-dir", "", "cache of the engine versions runs ask for, installed and verified on demand; runners of one machine may share it (default: <work-dir>/engines)")
		grace       = flag.Duration("grace", runner.DefaultInterruptGrace, "time terraform gets to stop after an interrupt before it is killed")
		idleExit    = flag.Duration("idle-exit", 6*time.Hour, "exit after this long without a run in progress and without a call (0: never), so that a runner nobody collects does not live forever")
		podName     = flag.String("pod-name", os.Getenv("POD_NAME"), "the runner's Pod (default $POD_NAME); with --pod-namespace and --pod-uid, the identity under which it takes state locks. Empty: the local process's identity")
		podNS       = flag.String("pod-namespace", os.Getenv("POD_NAMESPACE"), "the runner Pod's namespace (default $POD_NAMESPACE)")
		podUID      = flag.String("pod-uid", os.Getenv("POD_UID"), "the runner Pod's UID (default $POD_UID)")
		mirrors     stringList
		recycleDirs stringList
	)
	flag.Var(&mirrors, "provider-mirror", "read-only provider filesystem mirror (repeatable)")
	flag.Var(&recycleDirs, "recycle-dir", "directory emptied, beside --work-dir, when the controller recycles the runner for another object (repeatable): the Pod's other writable directories")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log)

	if *tlsCert == "" || *tlsKey == "" || *tlsClientCA == "" {
		return errors.New("--tls-cert, --tls-key and --tls-client-ca are required: the runner only serves mTLS")
	}
	tlsConfig, err := loadTLS(*tlsCert, *tlsKey, *tlsClientCA, *tlsClientCN)
	if err != nil {
		return err
	}
	pod, err := podHolder(*podName, *podNS, *podUID)
	if err != nil {
		return err
	}
	srv, err := server.NewServer(server.Options{
		Engine:          *engine,
		WorkDir:         *workDir,
		ProviderMirrors: mirrors,
		InterruptGrace:  *grace,
		Logger:          log,
		IdleExit:        *idleExit,
		Pod:             pod,
		EngineDir:       *engineDir,
		RecycleDirs:     recycleDirs,
	})
	if err != nil {
		return err
	}
	gs, err := srv.NewGRPCServer(tlsConfig)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if *addressFile != "" {
		if err := writeAtomic(*addressFile, []byte(lis.Addr().String()+"\n")); err != nil {
			lis.Close()
			return err
		}
	}
	if *addressFD > 0 {
		if err := writeToFD(*addressFD, lis.Addr().String()+"\n"); err != nil {
			lis.Close()
			return err
		}
	}
	log.Info("runner serving", "address", lis.Addr().String())

	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()

	// An orphaned runner (its controller gone for good) exits on its own;
	// checking a few times per idle-exit time is precise enough. A
	// recycled runner's idle exit is shorter (Recycle), hence the cap.
	every := 15 * time.Second
	if *idleExit > 0 {
		every = min(every, max(*idleExit/4, 100*time.Millisecond))
	}
	idle := time.NewTicker(every)
	defer idle.Stop()
wait:
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			break wait
		case <-srv.Exiting():
			break wait
		case <-idle.C:
			if srv.Idle() {
				log.Info("exiting: no run and no call for the idle-exit time", "idle-exit", srv.IdleExit().String())
				break wait
			}
		}
	}
	log.Info("shutting down: interrupting terraform", "grace", grace.String())
	// A little beyond the interrupt grace: terraform is killed at the end
	// of it, and its call still has to return.
	shutdownErr := srv.Shutdown(*grace + 5*time.Second)

	// The calls have returned (or are abandoned); let their final status
	// reach the client before the process exits.
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	if shutdownErr != nil {
		return shutdownErr
	}
	log.Info("runner stopped")
	return nil
}

// podHolder is the runner Pod's identity, or nil outside a Pod (no Pod
// name). A Pod without its namespace or UID is a deployment mistake: the
// controller could not check such an identity.
func podHolder(name, namespace, uid string) (*statelock.PodHolder, error) {
	if name == "" {
		return nil, nil
	}
	if namespace == "" || uid == "" {
		return nil, errors.New("--pod-name needs --pod-namespace and --pod-uid (or POD_NAMESPACE and POD_UID)")
	}
	return &statelock.PodHolder{Namespace: namespace, Name: name, UID: uid}, nil
}

func loadTLS(certFile, keyFile, caFile, clientCN string) (*tls.Config, error) {
	cert, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read client CA: %w", err)
	}
	cfg, err := mtls.ServerTLSConfig(cert, key, ca)
	if err != nil {
		return nil, err
	}
	if clientCN != "" {
		// The chain is verified by then; this narrows who may call to the
		// controller's certificate among those the CA issued.
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			if cn := cs.PeerCertificates[0].Subject.CommonName; cn != clientCN {
				return fmt.Errorf("client certificate for %q, want %q", cn, clientCN)
			}
			return nil
		}
	}
	return cfg, nil
}

// writeToFD writes data to the inherited file descriptor fd and closes it:
// the reader at the other end sees the whole address, then end of file.
func writeToFD(fd int, data string) error {
	f := os.NewFile(uintptr(fd), "address")
	if f == nil {
		return fmt.Errorf("--address-fd %d: not a file descriptor", fd)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		return fmt.Errorf("write the address to --address-fd %d: %w", fd, err)
	}
	return nil
}

// writeAtomic writes through a rename so that a reader polling the file
// never sees a partial address.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write address file: %w", err)
	}
	return nil
}
