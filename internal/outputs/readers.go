package outputs

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// SecretReads are the Secrets a Pod spec reads, each with how: "env NAME
// of container C", "envFrom of container C", "volume V" (a Secret volume
// or a projected one). `landform trace` and the web view's consumers of
// an outputs Secret both read workloads with it.
func SecretReads(spec corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	add := func(secret, how string) {
		if secret != "" && !slices.Contains(out[secret], how) {
			out[secret] = append(out[secret], how)
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range c.Env {
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				add(ref.SecretKeyRef.Name, fmt.Sprintf("env %s of container %s", e.Name, c.Name))
			}
		}
		for _, from := range c.EnvFrom {
			if from.SecretRef != nil {
				add(from.SecretRef.Name, "envFrom of container "+c.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName, "volume "+v.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name, "volume "+v.Name)
				}
			}
		}
	}
	return out
}
