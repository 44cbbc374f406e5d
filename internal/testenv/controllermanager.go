package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerManager is a kube-controller-manager running only the garbage
// collector against a test API server: what owner references do in a
// cluster, they do here.
type ControllerManager struct {
	cmd  *exec.Cmd
	done chan error
	// Log is the file it writes to.
	Log string
}

// GarbageCollectorArgs are kube-controller-manager's arguments to run only
// the garbage collector and the namespace controller (which empties a
// namespace being deleted) against the API server of kubeconfig, serving
// nothing.
func GarbageCollectorArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--controllers=garbage-collector-controller,namespace-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"-v=2",
	}
}

// StartGarbageCollector starts bin/kube-controller-manager (or
// $LANDFORM_KUBE_CONTROLLER_MANAGER) with the garbage collector only,
// talking to the API server of kubeconfig, logging to dir, and returns
// once the collector has been seen deleting an object whose owner went.
func StartGarbageCollector(ctx context.Context, c client.Client, kubeconfig, dir string) (*ControllerManager, error) {
	bin := os.Getenv("LANDFORM_KUBE_CONTROLLER_MANAGER")
	if bin == "" {
		assetsDir, err := assets()
		if err != nil {
			return nil, err
		}
		bin = filepath.Join(assetsDir, "kube-controller-manager")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the garbage collector needs kube-controller-manager at %s: run `make tools` (%w)", bin, err)
	}
	logPath := filepath.Join(dir, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, GarbageCollectorArgs(kubeconfig)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = DieWithParent()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	m := &ControllerManager{cmd: cmd, done: make(chan error, 1), Log: logPath}
	go func() {
		m.done <- cmd.Wait()
		logFile.Close()
	}()
	if err := m.awaitCollection(ctx, c); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// awaitCollection proves the collector works: a ConfigMap owned by another
// goes when its owner goes.
func (m *ControllerManager) awaitCollection(ctx context.Context, c client.Client) error {
	ns := "default"
	name := "gc-probe-" + rand.String(6)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-owner"}}
	if err := c.Create(ctx, owner); err != nil {
		return err
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	if err := c.Create(ctx, dependent); err != nil {
		return err
	}
	if err := c.Delete(ctx, owner); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case err := <-m.done:
			m.done <- err
			return fmt.Errorf("kube-controller-manager exited (%v): see %s", err, m.Log)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the garbage collector: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the garbage collector did not delete %s/%s within 2m: see %s", ns, name, m.Log)
		}
	}
}

// Stop ends the controller manager: SIGTERM, then SIGKILL after 10s.
func (m *ControllerManager) Stop() error {
	select {
	case err := <-m.done:
		m.done <- err
		return nil
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	return nil
}
