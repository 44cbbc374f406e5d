package fakekubelet

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountDir is where a container finds its ServiceAccount's token,
// the cluster's CA and its namespace (client-go's rest.InClusterConfig and
// the kubernetes backend's in_cluster_config read it).
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// start materialises the Pod's volumes and starts its runner.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod, fp *fakePod) error {
	root := filepath.Join(k.dir, string(pod.UID))
	volumes := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		volumes[v.Name] = dir
		if v.Secret == nil {
			continue
		}
		var s corev1.Secret
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.Secret.SecretName}, &s); err != nil {
			return fmt.Errorf("secret volume %s: %w", v.Name, err)
		}
		for key, data := range s.Data {
			if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
				return err
			}
		}
	}
	container := pod.Spec.Containers[0]
	mounts := maps.Clone(k.image)
	if mounts == nil {
		mounts = map[string]string{}
	}
	for _, m := range container.VolumeMounts {
		mounts[m.MountPath] = volumes[m.Name]
	}
	// A container's /dev/shm is its Pod's own: a path the runner is told
	// (--recycle-dir) names a directory of the Pod's here, never the
	// host's. (What runs in the Pod still sees the host's /dev/shm.)
	shm := filepath.Join(root, "shm")
	if err := os.MkdirAll(shm, 0o700); err != nil {
		return err
	}
	mounts["/dev/shm"] = shm
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	mapPath := func(v string) string {
		for _, p := range paths {
			if v == p || strings.HasPrefix(v, p+"/") {
				return mounts[p] + strings.TrimPrefix(v, p)
			}
		}
		return v
	}

	k.mu.Lock()
	k.nextIP++
	fp.ip = fmt.Sprintf("127.0.0.%d", k.nextIP)
	k.mu.Unlock()
	args := make([]string, len(container.Args))
	for i, a := range container.Args {
		args[i] = mapPath(a)
		// The Pod listens on all its addresses; here, on its own IP.
		if i > 0 && container.Args[i-1] == "--listen" && strings.HasPrefix(a, ":") {
			args[i] = fp.ip + a
		}
	}
	envs := []string{"PATH=" + k.path}
	for _, e := range container.Env {
		switch {
		case e.ValueFrom == nil:
			envs = append(envs, e.Name+"="+mapPath(e.Value))
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldRef(pod, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			envs = append(envs, e.Name+"="+v)
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok, err := k.secretKey(ctx, pod.Namespace, e.ValueFrom.SecretKeyRef)
			if err != nil {
				return fmt.Errorf("env %s: %w", e.Name, err)
			}
			if ok {
				envs = append(envs, e.Name+"="+v)
			}
		default:
			return fmt.Errorf("env %s: only values, fieldRef and secretKeyRef are supported by the fake kubelet", e.Name)
		}
	}

	cmd := exec.Command(k.runnerBin, args...)
	if k.apiServer != nil && (pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken) {
		sa := filepath.Join(root, "serviceaccount")
		host, port, err := k.serviceAccount(ctx, pod, sa)
		if err != nil {
			return err
		}
		envs = append(envs, "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port)
		if cmd, err = inCluster(k.runnerBin, args, sa); err != nil {
			return err
		}
	}
	cmd.Env = append(cmd.Env, envs...)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// The runner and everything it starts are one process group: the
	// container, which SIGKILL takes down as a whole.
	cmd.SysProcAttr.Setpgid = true
	cmd.Stdout, cmd.Stderr = k.logs, k.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	k.mu.Lock()
	fp.cmd = cmd
	fp.exited = make(chan struct{})
	fp.reported = make(chan struct{})
	k.mu.Unlock()
	go func() {
		fp.exitErr = cmd.Wait()
		close(fp.exited)
		_ = os.RemoveAll(root)
		k.exited(fp)
	}()
	return nil
}

// secretKey resolves a secretKeyRef as the kubelet does: a missing Secret
// or key fails the container's start (CreateContainerConfigError), unless
// the reference is optional, and then the variable is left out (ok false).
func (k *Kubelet) secretKey(ctx context.Context, namespace string, ref *corev1.SecretKeySelector) (value string, ok bool, err error) {
	optional := ref.Optional != nil && *ref.Optional
	var s corev1.Secret
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) && optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("secret %q: %w", ref.Name, err)
	}
	v, found := s.Data[ref.Key]
	if !found && !optional {
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, namespace, ref.Name)
	}
	return string(v), found, nil
}

// fieldRef resolves the downward API's metadata fields, as the kubelet
// does.
func fieldRef(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return "fake-node", nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported by the fake kubelet", path)
}

// serviceAccount writes what the kubelet projects into ServiceAccountDir
// (a token of the Pod's ServiceAccount bound to the Pod, the API server's
// CA, the namespace) into dir, and returns the API server's host and port.
func (k *Kubelet) serviceAccount(ctx context.Context, pod *corev1.Pod, dir string) (string, string, error) {
	u, err := url.Parse(k.apiServer.Host)
	if err != nil || u.Hostname() == "" {
		return "", "", fmt.Errorf("API server %q: not a URL", k.apiServer.Host)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	ca := k.apiServer.CAData
	if len(ca) == 0 && k.apiServer.CAFile != "" {
		if ca, err = os.ReadFile(k.apiServer.CAFile); err != nil {
			return "", "", err
		}
	}
	name := pod.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name}}
	if err := k.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", "", fmt.Errorf("a token for ServiceAccount %s/%s: %w", pod.Namespace, name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	for file, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(pod.Namespace)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			return "", "", err
		}
	}
	return u.Hostname(), port, nil
}
