package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
)

// controllerPodSelector selects the controller's Pods, as the chart and
// config/manager label them: a shard's Pods carry component "shard".
const controllerPodSelector = nameLabel + "=" + nameValue + "," + componentLabel + " in (" + controllerValue + ",shard)"

// resPodLogs is the log subresource as `kubectl auth can-i` takes it.
const resPodLogs = "pods/log"

// runControllerLogs prints the lines of the controller's log about obj,
// from every controller Pod (the leader reconciles; a Pod that lost the
// lease may have logged about it before), and with o.follow keeps
// printing them until interrupted.
func (a *app) runControllerLogs(ctx context.Context, name string, o logsOptions) error {
	s, obj, err := a.object(ctx, name)
	if err != nil {
		return err
	}
	sel, _ := labels.Parse(controllerPodSelector)
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return s.explain(err, "list", resPods, "Pod", "", "")
	}
	pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == "" })
	if len(pods.Items) == 0 {
		return fmt.Errorf("no controller Pod found (Pods labelled %s, in any namespace): the controller may run outside the cluster, or not at all (%s)",
			controllerPodSelector, a.cmdName("version"))
	}
	slices.SortFunc(pods.Items, func(x, y corev1.Pod) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return err
	}
	out := &lockedWriter{w: a.Streams.Out}
	read := func(p *corev1.Pod) error {
		prefix := ""
		if len(pods.Items) > 1 {
			prefix = "[" + p.Name + "] "
		}
		stream := func(opts *corev1.PodLogOptions, line func(time.Time, []byte) error) error {
			opts.Container = managerContainer(p)
			opts.Timestamps = true
			r, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
			if err != nil {
				return s.explain(err, "get", resPodLogs, "Pod", p.Namespace, p.Name)
			}
			defer r.Close()
			return scanLog(r, line)
		}
		err := copyControllerLog(stream, out, prefix, obj, o)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	errs := make([]error, len(pods.Items))
	if o.follow {
		var wg sync.WaitGroup
		for i := range pods.Items {
			wg.Go(func() { errs[i] = read(&pods.Items[i]) })
		}
		wg.Wait()
	} else {
		for i := range pods.Items {
			errs[i] = read(&pods.Items[i])
		}
	}
	// A Pod whose log cannot be read (not started yet, its node gone) is
	// worth a warning while another Pod's log was read.
	failed := slices.DeleteFunc(slices.Clone(errs), func(err error) bool { return err == nil })
	if len(failed) == len(errs) {
		return errors.Join(failed...)
	}
	for _, err := range failed {
		fmt.Fprintf(a.Streams.ErrOut, "warning: %v\n", err)
	}
	return nil
}

// logStream reads one container's log as opts say, with the kubelet's
// timestamps, and calls line with each line and its time.
type logStream func(opts *corev1.PodLogOptions, line func(time.Time, []byte) error) error

// copyControllerLog copies the lines about obj of one controller Pod's log
// to w, each after prefix, as o says.
func copyControllerLog(stream logStream, w io.Writer, prefix string, obj *v1alpha1.Terraform, o logsOptions) error {
	opts := &corev1.PodLogOptions{Follow: o.follow && o.tail < 0}
	if o.since > 0 {
		// Whole seconds, as the API takes them: rounded up, not to 0.
		opts.SinceSeconds = ptr.To(int64((o.since + time.Second - 1) / time.Second))
	}
	emit := func(line []byte) error {
		_, err := fmt.Fprintf(w, "%s%s\n", prefix, line)
		return err
	}
	printAbout := func(_ time.Time, line []byte) error {
		if !aboutObject(line, obj.Namespace, obj.Name) {
			return nil
		}
		return emit(line)
	}
	if o.tail < 0 {
		return stream(opts, printAbout)
	}
	// --tail counts the lines printed, not the controller's lines (most
	// are about other objects): the last ones about obj are kept while the
	// whole log is read, and printed at its end.
	var kept [][]byte
	var last time.Time
	atLast := 0 // lines read that were logged at last
	err := stream(opts, func(t time.Time, line []byte) error {
		if t.Equal(last) {
			atLast++
		} else {
			last, atLast = t, 1
		}
		if aboutObject(line, obj.Namespace, obj.Name) {
			kept = append(kept, bytes.Clone(line))
			if len(kept) > o.tail {
				kept = kept[1:]
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, line := range kept {
		if err := emit(line); err != nil {
			return err
		}
	}
	if !o.follow {
		return nil
	}
	// Following starts over from the last line's second (the API takes no
	// finer time), skipping the lines already read.
	opts.Follow = true
	if !last.IsZero() {
		opts.SinceSeconds, opts.SinceTime = nil, &metav1.Time{Time: last}
	}
	return stream(opts, func(t time.Time, line []byte) error {
		switch {
		case t.Before(last):
			return nil
		case t.Equal(last) && atLast > 0:
			atLast--
			return nil
		}
		return printAbout(t, line)
	})
}

// scanLog calls line with each line of a container's log read with
// timestamps, and its time: the kubelet starts each line with it.
func scanLog(r io.Reader, line func(time.Time, []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		text := sc.Bytes()
		var t time.Time
		if stamp, rest, ok := bytes.Cut(text, []byte(" ")); ok {
			if parsed, err := time.Parse(time.RFC3339Nano, string(stamp)); err == nil {
				t, text = parsed, rest
			}
		}
		if err := line(t, text); err != nil {
			return err
		}
	}
	return sc.Err()
}

// managerContainer is the controller's container in p: "manager", as the
// chart names it, else the only one.
func managerContainer(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == "manager" {
			return c.Name
		}
	}
	if len(p.Spec.Containers) == 1 {
		return p.Spec.Containers[0].Name
	}
	return ""
}

// aboutObject reports whether line, one line of the controller's log, is
// about the Terraform object namespace/name. The reconciler's lines carry
// the object as controller-runtime names it ("Terraform": {"name",
// "namespace"}), the run tracker's as "terraform": "namespace/name". A
// JSON line (the controller's default) is read whole; a console line
// (--log-encoding=console) ends in the same JSON object of fields.
func aboutObject(line []byte, namespace, name string) bool {
	var fields map[string]any
	if json.Unmarshal(line, &fields) != nil {
		fields = nil
		for i := bytes.IndexByte(line, '{'); i >= 0; {
			if json.Unmarshal(line[i:], &fields) == nil {
				break
			}
			fields = nil
			next := bytes.IndexByte(line[i+1:], '{')
			if next < 0 {
				break
			}
			i += 1 + next
		}
	}
	if fields == nil {
		return false
	}
	if ref, ok := fields[v1alpha1.TerraformKind].(map[string]any); ok && ref["name"] == name && ref["namespace"] == namespace {
		return true
	}
	return fields["terraform"] == namespace+"/"+name
}

// lockedWriter writes whole lines from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
