// Package kubeclient is the runner's client for the two kinds it reads and
// writes: the state's Secret and its Lease.
//
// A runner process starts for every run, and initialises every package it
// links at each start. client-go's clientset links every API group's
// types and typed client, whose initialisation (their scheme
// registration above all) took about a third of a runner's start before
// it served (GODEBUG=inittrace=1, 12 of 33 ms). This client links two
// groups and registers them in a scheme of its own; the controller keeps
// client-go's typed clients, which have the same methods
// (statelock.Leases, tfstate.Secrets).
package kubeclient

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

func init() {
	// Cheap: the types' own packages are initialised either way; this
	// only names the two groups' kinds.
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// Client reaches Secrets and Leases with one rest.Config.
type Client struct {
	core, coordination rest.Interface
}

// New returns a Client for cfg, which it does not change.
func New(cfg *rest.Config) (*Client, error) {
	core, err := restClient(cfg, "/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	coordination, err := restClient(cfg, "/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{core: core, coordination: coordination}, nil
}

func restClient(cfg *rest.Config, path string, gv schema.GroupVersion) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = path
	c.GroupVersion = &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", gv, err)
	}
	return rc, nil
}

// Secrets are the Secrets of namespace.
func (c *Client) Secrets(namespace string) *Secrets {
	return &Secrets{c: c.core, ns: namespace}
}

// Leases are the Leases of namespace.
func (c *Client) Leases(namespace string) *Leases {
	return &Leases{c: c.coordination, ns: namespace}
}

// Secrets gets and updates the Secrets of one namespace.
type Secrets struct {
	c  rest.Interface
	ns string
}

// Get returns Secret name.
func (s *Secrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	err := s.c.Get().Namespace(s.ns).Resource("secrets").Name(name).VersionedParams(&opts, params).Do(ctx).Into(out)
	return out, err
}

// Update writes secret, conditional on its resourceVersion.
func (s *Secrets) Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	err := s.c.Put().Namespace(s.ns).Resource("secrets").Name(secret.Name).VersionedParams(&opts, params).Body(secret).Do(ctx).Into(out)
	return out, err
}

// Leases gets, creates and updates the Leases of one namespace.
type Leases struct {
	c  rest.Interface
	ns string
}

// Get returns Lease name.
func (l *Leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Get().Namespace(l.ns).Resource("leases").Name(name).VersionedParams(&opts, params).Do(ctx).Into(out)
	return out, err
}

// Create creates lease.
func (l *Leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Post().Namespace(l.ns).Resource("leases").VersionedParams(&opts, params).Body(lease).Do(ctx).Into(out)
	return out, err
}

// Update writes lease, conditional on its resourceVersion.
func (l *Leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).VersionedParams(&opts, params).Body(lease).Do(ctx).Into(out)
	return out, err
}
