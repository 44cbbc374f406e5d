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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
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
// lease may have logged about it before), and with follow keeps printing
// them until interrupted.
func (a *app) runControllerLogs(ctx context.Context, name string, follow bool) error {
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
		opts := &corev1.PodLogOptions{Container: managerContainer(p), Follow: follow}
		stream, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return s.explain(err, "get", resPodLogs, "Pod", p.Namespace, p.Name)
		}
		defer stream.Close()
		err = filterControllerLog(stream, out, prefix, obj)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	errs := make([]error, len(pods.Items))
	if follow {
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

// filterControllerLog copies the lines of r about obj to w.
func filterControllerLog(r io.Reader, w io.Writer, prefix string, obj *v1alpha1.Terraform) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if aboutObject(sc.Bytes(), obj.Namespace, obj.Name) {
			if _, err := fmt.Fprintf(w, "%s%s\n", prefix, sc.Bytes()); err != nil {
				return err
			}
		}
	}
	return sc.Err()
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
