package stats

import (
	"cmp"
	"maps"
	"slices"

	"github.com/fabricsim/fabricsim/formats/links"
)

// JobTierLoad is what one job put on one tier's links.
type JobTierLoad struct {
	Job    string `json:"job"`
	Tier   string `json:"tier"`
	Links  int64  `json:"links"`  // directed links of the tier carrying its bytes
	Shared int64  `json:"shared"` // of those, links another job's bytes crossed too
	Bytes  int64  `json:"bytes"`
	BusyNs int64  `json:"busy_ns"`
	// UtilTierMean is the job's part of the tier's mean utilization: its
	// busy time summed over the tier's links, over the directed links of
	// the tier that carried any bytes and the makespan. The jobs' values
	// add up to the tier's (TierLoad.UtilMean of group type all).
	UtilTierMean float64 `json:"util_tier_mean"`
	// UtilMax is its utilization of the tier's link it loaded most.
	UtilMax float64 `json:"util_max"`
}

// jobTierLoads sums a links file's rows per job and tier, tiers in the
// report's order and jobs in order of first appearance; nil for a file
// without jobs.
func jobTierLoads(rows []links.Row, ll *LinkLoads) []JobTierLoad {
	type key struct {
		job, tier string
	}
	type dir struct{ link, src int32 }
	var jobs []string
	per := map[key]*JobTierLoad{}
	perLink := map[key]map[dir]float64{} // the job's utilization of each of the tier's links
	for i := range rows {
		r := &rows[i]
		if r.Job == "" {
			continue
		}
		if !slices.Contains(jobs, r.Job) {
			jobs = append(jobs, r.Job)
		}
		k := key{r.Job, r.Tier}
		j := per[k]
		if j == nil {
			j = &JobTierLoad{Job: r.Job, Tier: r.Tier}
			per[k], perLink[k] = j, map[dir]float64{}
		}
		j.Bytes += r.Bytes
		j.BusyNs += r.BusyNs
		perLink[k][dir{r.Link, r.Src}] += r.Utilization
	}
	if len(jobs) == 0 {
		return nil
	}
	loaded := map[string]int64{} // per tier: directed links carrying bytes
	shared := map[dir]bool{}
	for _, d := range ll.dirs {
		loaded[d.Tier]++
		shared[dir{d.Link, d.Src}] = len(d.Jobs) > 1
	}
	var out []JobTierLoad
	for _, t := range ll.Tiers {
		if t.GroupType != GroupAll {
			continue
		}
		for _, job := range jobs {
			k := key{job, t.Tier}
			j := per[k]
			if j == nil {
				out = append(out, JobTierLoad{Job: job, Tier: t.Tier})
				continue
			}
			var sum float64
			ds := slices.Collect(maps.Keys(perLink[k]))
			slices.SortFunc(ds, func(a, b dir) int { return cmp.Or(cmp.Compare(a.link, b.link), cmp.Compare(a.src, b.src)) })
			for _, d := range ds { // in link order: the float sum is the same every run
				u := perLink[k][d]
				j.Links++
				if shared[d] {
					j.Shared++
				}
				j.UtilMax = max(j.UtilMax, u)
				sum += u
			}
			if n := loaded[t.Tier]; n > 0 {
				j.UtilTierMean = sum / float64(n)
			}
			out = append(out, *j)
		}
	}
	return out
}

// Jobs lists the jobs of JobTiers in their order.
func (ll *LinkLoads) Jobs() []string {
	var jobs []string
	for _, j := range ll.JobTiers {
		if !slices.Contains(jobs, j.Job) {
			jobs = append(jobs, j.Job)
		}
	}
	return jobs
}

// jobTable is the report's table of JobTiers (nil without jobs).
func (ll *LinkLoads) jobTable() *textTable {
	if len(ll.JobTiers) == 0 {
		return nil
	}
	t := &textTable{
		title: "Load per job and tier (util mean: the job's part of the tier's mean over its loaded links; shared: links another job also used)",
		head:  []string{"job", "tier", "links", "shared", "bytes", "util mean %", "util max %"},
		align: "llrrrrr",
	}
	for _, j := range ll.JobTiers {
		if j.Bytes == 0 {
			continue
		}
		t.rows = append(t.rows, []string{j.Job, j.Tier, count(j.Links), count(j.Shared), humanBytes(j.Bytes), pct(j.UtilTierMean), pct(j.UtilMax)})
	}
	return t
}
