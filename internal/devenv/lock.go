package devenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFile keeps a second `landform dev` off a state directory. The kernel
// releases the lock when the process dies, so a crashed run leaves no stale
// lock behind; the PID in the file is only there to name the holder.
type lockFile struct{ f *os.File }

func acquireLock(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := "another process"
		if pid := strings.TrimSpace(string(b)); pid != "" {
			holder = "pid " + pid
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another landform dev (%s) is using %s: stop it first (Ctrl-C in its terminal) or pass another --state-dir",
				holder, filepath.Dir(path))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, err
	}
	return &lockFile{f: f}, nil
}

func (l *lockFile) release() error {
	_ = l.f.Truncate(0)
	return l.f.Close()
}
