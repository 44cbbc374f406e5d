package server

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// outputDrain is how long the runner still reads an apply's or a
// destroy's output after the engine exited. The engine's own output is in
// the pipe by then and read at once; only a process it left behind
// holding the pipe makes this wait at all, and what such a process writes
// later is not the engine's.
const outputDrain = 2 * time.Second

// runWithOwnPipes runs call, an apply or a destroy through ws.tf, with the
// engine's stdout and stderr going to named pipes the runner reads into
// logf, instead of terraform-exec's pipes. terraform-exec reads its own to
// their end before it waits for the engine, with no wait delay then
// (runTerraformCmd): a process the engine's provisioners leave behind
// holding them would hold the run as long as it lives. These pipes are
// read until outputDrain after the engine exited. It returns call's
// outcome as engineResult does, with the stderr read here.
func (s *Server) runWithOwnPipes(ctx context.Context, ws *workspace, logf func(string), call func() error) error {
	dir, err := os.MkdirTemp(s.tmpDir, "output-")
	if err != nil {
		return internalError("create the engine's output pipes", err)
	}
	defer os.RemoveAll(dir)
	var paths [2]string
	var readers, keepers [2]*os.File
	defer func() {
		for _, f := range append(readers[:], keepers[:]...) {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i, name := range []string{"stdout", "stderr"} {
		paths[i] = filepath.Join(dir, name)
		if err := syscall.Mkfifo(paths[i], 0o600); err != nil {
			return internalError("create the engine's output pipes", err)
		}
		if readers[i], err = os.OpenFile(paths[i], os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
			return internalError("open the engine's output pipes", err)
		}
		// Until the engine opens the pipe, it has no writer, and a read
		// would end at once: the runner holds one until call returns.
		if keepers[i], err = os.OpenFile(paths[i], os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
			return internalError("open the engine's output pipes", err)
		}
	}

	stdout, stderr, flush := logWriters(logf, nil)
	var errText bytes.Buffer
	var abandoned atomic.Bool
	done := make(chan struct{}, 2)
	for i, w := range []io.Writer{stdout, io.MultiWriter(stderr, &errText)} {
		go func() {
			defer func() { done <- struct{}{} }()
			buf := make([]byte, 32<<10)
			for {
				n, err := readers[i].Read(buf)
				if n > 0 && !abandoned.Load() {
					_, _ = w.Write(buf[:n])
				}
				if err != nil {
					return
				}
			}
		}()
	}

	if err := ws.tf.SetEnv(ws.engine.environ(ws.env, paths[0], paths[1])); err != nil {
		return internalError("prepare engine", err)
	}
	callErr := call()
	if err := ws.tf.SetEnv(ws.engine.environ(ws.env, "", "")); err != nil {
		return internalError("prepare engine", err)
	}

	for i := range keepers {
		keepers[i].Close()
		keepers[i] = nil
		_ = readers[i].SetReadDeadline(time.Now().Add(outputDrain))
	}
	// Where a pipe takes no deadline (macOS), its reader is left behind.
	timeout := time.NewTimer(outputDrain + time.Second)
	defer timeout.Stop()
	for range 2 {
		select {
		case <-done:
		case <-timeout.C:
			abandoned.Store(true)
			return engineResultWith(ctx, callErr, "")
		}
	}
	flush()
	return engineResultWith(ctx, callErr, errText.String())
}
