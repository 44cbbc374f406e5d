// Package planstore keeps each Terraform object's latest plan in Secrets
// tfplan-<name>-<i>: plan file, JSON plan, redacted human plan and lock
// file as one gzip'd tar, stored and verified by internal/chunkstore, with
// the plan's id, revision, inputs digest and applied flag on the index.
package planstore

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/chunkstore"
)

// Plan is one stored plan.
type Plan struct {
	// ID is the plan id (plan-<revision>-<changes digest>).
	ID string
	// Revision is the source revision the plan was made from.
	Revision string
	// InputsDigest identifies what else the plan was made from; opaque here.
	InputsDigest string
	// PlanFile is terraform's binary plan, which apply takes.
	PlanFile []byte
	// JSONPlan is `terraform show -json` of the plan.
	JSONPlan []byte
	// HumanPlan is the plan as terraform prints it.
	HumanPlan []byte
	// LockFile is the dependency lock file the plan was made with.
	LockFile []byte
	// Applied is set once the plan was applied; the plan stays stored so the
	// CLI can still show it.
	Applied bool
	// Digest is "sha256:<hex>" of the stored payload: set by Save, and by
	// Load and LoadMeta from the index. The controller records it where
	// runners cannot write (status) and compares it before an apply.
	Digest string
}

// ErrNotFound means there is no complete, intact plan stored; the error
// wrapping it says why.
var ErrNotFound = errors.New("plan not found")

// Store keeps plans in Secrets in the owner's namespace.
//
// Plans are large, so give Store a client that reads from the API server
// (or from a cache restricted to app.kubernetes.io/managed-by=landform),
// not one that caches every Secret of the cluster. A cached read may also
// lag a Save, which Load reports as ErrNotFound until the cache catches up.
type Store struct {
	Client client.Client
}

// Labels and annotations on plan Secrets.
const (
	// PlanLabel holds the plan id on every chunk.
	PlanLabel = "infra.landform.dev/plan"
	// SecretType is the type of plan Secrets.
	SecretType = "infra.landform.dev/plan"

	annID       = "infra.landform.dev/plan-id"
	annRevision = "infra.landform.dev/plan-revision"
	annInputs   = "infra.landform.dev/plan-inputs-digest"
	annChunks   = "infra.landform.dev/plan-chunks"
	annSHA256   = "infra.landform.dev/plan-sha256"
	annApplied  = "infra.landform.dev/plan-applied"
	annChunk    = "infra.landform.dev/plan-chunk"

	dataKey = "plan"
	// fieldOwner is the field manager of plan Secrets.
	fieldOwner = "landform-planstore"
)

// layout is where plans are in Secrets.
var layout = chunkstore.Layout{
	Kind:             "tfplan",
	What:             "plan",
	Type:             SecretType,
	DataKey:          dataKey,
	DigestAnnotation: annSHA256,
	ChunksAnnotation: annChunks,
	ChunkAnnotation:  annChunk,
	DigestHex:        true,
	FieldOwner:       fieldOwner,
}

// ChunkName names chunk i of owner's plan Secrets (tfplan-<name>-<i>).
func ChunkName(owner *v1alpha1.Terraform, i int) string { return layout.ChunkName(owner.Name, i) }

func (s Store) chunks() chunkstore.Store { return chunkstore.Store{Client: s.Client, Layout: layout} }
