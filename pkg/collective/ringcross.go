package collective

// RingCrossings is a ring's steps over n ranks on nNodes servers and, of
// those, how many a datum takes across servers (ringPathPs' path, the
// analytical model's share of network steps): n-1 steps crossing nNodes
// times, both doubled for AllReduce (reduce then gather), never more
// crossings than steps; none on one server.
func RingCrossings(op Op, n, nNodes int) (steps, inter int64) {
	steps = int64(n - 1)
	if nNodes > 1 {
		inter = int64(nNodes)
	}
	if op == AllReduce {
		steps, inter = 2*steps, 2*inter
	}
	return steps, min(inter, steps)
}
