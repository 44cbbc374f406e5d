package planstore

import "github.com/landform-dev/landform/internal/owned"

// chunkName names chunk i of owner's plan: "tfplan-<owner>-<i>".
func chunkName(owner string, i int) string { return owned.ChunkName("tfplan", owner, i) }

// chunkIndex returns i if name is chunk i of owner's plan.
func chunkIndex(owner, name string) (int, bool) { return owned.ChunkIndex("tfplan", owner, name) }
