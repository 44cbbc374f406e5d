// trystate is module code that tries what a runner's state identity lets it
// do: run by a module's local-exec provisioner, it reaches the API server
// the way terraform's kubernetes backend does in the runner (the kubeconfig
// the runner wrote into the module directory), tries each operation named
// on the command line, and writes the outcome of each to a JSON file.
//
//	trystate -kubeconfig K -namespace NS -out FILE get:secret/NAME patch:lease/NAME create:secret/NAME list:secret
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig")
	namespace := flag.String("namespace", "", "namespace")
	out := flag.String("out", "", "result file")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	results := map[string]string{}
	for _, op := range flag.Args() {
		results[op] = outcome(try(c, *namespace, op))
	}
	b, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fail(err)
	}
}

func try(c *kubernetes.Clientset, ns, op string) error {
	ctx := context.Background()
	verb, target, _ := strings.Cut(op, ":")
	kind, name, _ := strings.Cut(target, "/")
	secrets, leases := c.CoreV1().Secrets(ns), c.CoordinationV1().Leases(ns)
	empty := []byte(`{}`)
	var err error
	switch verb + " " + kind {
	case "get secret":
		_, err = secrets.Get(ctx, name, metav1.GetOptions{})
	case "patch secret":
		_, err = secrets.Patch(ctx, name, types.MergePatchType, empty, metav1.PatchOptions{})
	case "create secret":
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"planted": "x"}}, metav1.CreateOptions{})
	case "delete secret":
		err = secrets.Delete(ctx, name, metav1.DeleteOptions{})
	case "list secret":
		var l *corev1.SecretList
		if l, err = secrets.List(ctx, metav1.ListOptions{}); err == nil {
			names := make([]string, 0, len(l.Items))
			for _, s := range l.Items {
				names = append(names, s.Name)
			}
			return fmt.Errorf("listed %s", strings.Join(names, ","))
		}
	case "get lease":
		_, err = leases.Get(ctx, name, metav1.GetOptions{})
	case "patch lease":
		_, err = leases.Patch(ctx, name, types.MergePatchType, empty, metav1.PatchOptions{})
	case "create lease":
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("unknown operation")
	}
	return err
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "allowed"
	case apierrors.IsForbidden(err):
		return "forbidden"
	}
	return err.Error()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
