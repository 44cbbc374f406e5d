package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Engine callers: the value of BENCH_ENGINE_CALLER that enginecount writes
// before each subcommand.
const (
	callerRaw      = "raw"
	callerLandform = "landform"
)

// engineCounter is the enginecount wrapper built for this run, and the
// file it appends to.
type engineCounter struct {
	wrapper string // <tmp>/engine/tofu-<version>
	file    string
}

// wrapperName is the counting wrapper's name for the engine whose
// `version` prints versionLine ("OpenTofu v1.12.6"): tofu-1.12.6. The
// runner knows a real engine and its version from the binary's build
// information, which the wrapper hides; its name tells the runner both
// instead (a runner that did not know the version would run the engine
// once more per object, for terraform-exec's version check).
func wrapperName(versionLine string) string {
	if v, ok := strings.CutPrefix(versionLine, "OpenTofu v"); ok && v != "" && !strings.ContainsAny(v, " /") {
		return "tofu-" + v
	}
	return "tofu"
}

// buildEngineCounter builds hack/bench/enginecount as dir/name, execing
// engine and appending to countFile.
func buildEngineCounter(dir, name, engine, countFile string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out,
		"-ldflags", fmt.Sprintf("-X main.engine=%s -X main.counter=%s", engine, countFile),
		"github.com/landform-dev/landform/hack/bench/enginecount")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the engine counter: %w\n%s", err, b)
	}
	return out, nil
}

// engineStart is one engine process the wrapper started.
type engineStart struct {
	caller, sub string
	at          time.Time
}

// starts reads the counter file: every process, in the order started.
func (e *engineCounter) starts() []engineStart {
	var out []engineStart
	b, _ := os.ReadFile(e.file)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		s := engineStart{caller: f[0], sub: f[1]}
		if len(f) > 2 {
			if us, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				s.at = time.UnixMicro(us)
			}
		}
		out = append(out, s)
	}
	return out
}

// counts reads the counter file: per caller, processes per subcommand.
func (e *engineCounter) counts() map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, s := range e.starts() {
		if out[s.caller] == nil {
			out[s.caller] = map[string]int{}
		}
		out[s.caller][s.sub]++
	}
	return out
}

// wrapperCost measures what the wrapper adds to one process: /bin/true
// through a wrapper built for it against /bin/true itself, the medians of n
// runs each.
func wrapperCost(dir string, n int) (WrapperCost, error) {
	wrapper, err := buildEngineCounter(dir, "true", "/bin/true", filepath.Join(dir, "count"))
	if err != nil {
		return WrapperCost{}, err
	}
	measure := func(bin string) (wall, cpu []float64, err error) {
		for i := 0; i < n; i++ {
			cmd := exec.Command(bin, "version")
			start := time.Now()
			if err := cmd.Run(); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", bin, err)
			}
			wall = append(wall, time.Since(start).Seconds()*1000)
			cpu = append(cpu, (cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime()).Seconds()*1000)
		}
		return wall, cpu, nil
	}
	bw, bc, err := measure("/bin/true")
	if err != nil {
		return WrapperCost{}, err
	}
	ww, wc, err := measure(wrapper)
	if err != nil {
		return WrapperCost{}, err
	}
	return WrapperCost{WallMillis: median(ww) - median(bw), CPUMillis: median(wc) - median(bc), Samples: n}, nil
}

// perRun divides every count by runs.
func perRun(m map[string]int, runs int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = float64(v) / float64(runs)
	}
	return out
}
