package collective

// AllToAllTime is the planner's AllToAll estimate in microseconds for
// size bytes (the whole buffer of one rank) on t's communicator of a
// cluster of m servers: the slower of the NVLink and NIC shares plus the
// point-to-point latency, as the collective-granularity stream predicts
// it. Serving prices its expert-parallel AllToAlls with it.
func AllToAllTime(m ServerModel, t *Tuner, size int64) float64 {
	return (&Planner{M: m}).a2aTime(t, size, t.NRanks, t.NNodes)
}
