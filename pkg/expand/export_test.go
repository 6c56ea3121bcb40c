package expand

import "github.com/fabricsim/fabricsim/pkg/flowset"

// ImagedRows is how many representative rows' members were attached as
// images (followImages) rather than made.
func ImagedRows(x *Store) int64 { return x.imaged }

// Placement is what approximate reuse matches groups on (placement).
func Placement(x *Store, groups [][]int32) string { return x.placement(groups) }

func RailPlan(x *Store, groups [][]int32) ([]int32, int32) {
	p := x.railPlanOf(groups, "ring")
	return p.run, p.copies
}

func RailsAlike(x *Store) string { return railsAlike(x.in.Topology) }

// ImagesOf is rot's check of a node's groups (rotRun's).
func ImagesOf(r *PodRotation, groups [][]int32, gpus int) bool { return r.imagesOf(groups, gpus) }

// CutToShare is cutToShare (a met node's flow cut to the share left).
func CutToShare(f *flowset.Flow, sc float64) { cutToShare(f, sc) }
