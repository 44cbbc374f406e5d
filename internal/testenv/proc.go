package testenv

import (
	"os"
	"path/filepath"
	"strconv"
)

// ProcFiles reads the file name (cmdline, stat, ...) of every process in
// /proc, by pid. A process that ends meanwhile is left out; so is every
// process where there is no /proc (not Linux).
func ProcFiles(name string) map[int][]byte {
	entries, _ := os.ReadDir("/proc")
	files := map[int][]byte{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), name)); err == nil {
			files[pid] = b
		}
	}
	return files
}
