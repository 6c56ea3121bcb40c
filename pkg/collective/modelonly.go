package collective

// ModelOnly counts the collectives that collective granularity prices by
// NCCL's model time plus transportPs alone where the transport's step
// costs apply, and all collectives (compute phases and pipeline
// transfers, which stay flows, left out). The closed forms of the flows'
// mechanism (linktime.go: the AllToAll's pace, the ring's cycle, the
// tree's pipeline, the even split's bound) read the server model's NVLink
// rate, which a server of one GPU has not, so on such a fabric every
// collective across servers falls back to the model. There the COLL node
// strays from the flows by up to 5x either way (k=8 fat-tree, 32 ranks
// one a server, h100-ib: AllToAll 64 KiB 23.9 against 126.9 us, tree
// AllReduce 16 MiB at 800G 1383 against 679 us), so simccl-decompose
// says so.
func (d *Decomposer) ModelOnly(colls []Coll) (n, all int) {
	if !d.Collectives {
		return 0, 0
	}
	for i := range colls {
		c := &colls[i]
		if c.Compute || Op(c.Rec.Op) == SendRecv {
			continue
		}
		all++
		if d.Planner.M.NVLinkGBps > 0 || c.Plan.NoOp || c.Rec.Size <= 0 {
			continue
		}
		if s := d.Planner.Opt.stepCosts(c.Plan); s.intra == 0 && s.inter == 0 {
			continue // no step costs: the model's time is the flows' (preset=none)
		}
		if len(d.Fabric.nodesOf(c.Ranks)) > 1 {
			n++
		}
	}
	return n, all
}
