package serve

import (
	"container/heap"
	"fmt"

	"github.com/fabricsim/fabricsim/formats/requests"
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/des"
	"github.com/fabricsim/fabricsim/pkg/nccl"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// Config is one serving run.
type Config struct {
	Model Model
	Roof  Roofline
	// Table, when not nil, times the layers' operations it gives in place
	// of the roofline (the roofline prices the rest).
	Table   *ComputeTable
	Prefill ReplicaSpec
	Decode  ReplicaSpec
	// GPUs holds the GPU of every rank: the prefill replicas' ranks first,
	// then the decode replicas'; within a replica, stage x TP + TP rank.
	GPUs []int32
	// MaxBatch bounds the requests in one prefill batch and in one decode
	// iteration. Without decode replicas (Decode.Count 0) each prefill
	// replica also decodes its requests, prompts and decode tokens sharing
	// its iterations (colocated serving, no KV transfer).
	MaxBatch int
	// PrefillTokens bounds the prompt tokens of one prefill batch (a
	// longer prompt runs alone).
	PrefillTokens int64
	// Chunk, colocated only (0: off), bounds the tokens of one iteration,
	// decode tokens first: prompts are prefilled in chunks of what is left
	// (chunked prefill, as Sarathi-Serve and vLLM do).
	Chunk int64
	// KVTokens bounds the KV cache a decode replica holds, in tokens (0:
	// no bound): a request joins the batch only when the batch's prompts
	// and full outputs fit, so no request is ever preempted; one that
	// alone exceeds the bound runs alone.
	KVTokens int64
	// PPFlows sends the activations between pipeline stages as flows on
	// the fabric, sharing links with the KV transfers, instead of pricing
	// them at bytes / path bottleneck + latency.
	PPFlows bool
	// NoContention runs every KV transfer at its path's bottleneck
	// whatever else is in flight (SimAI's model), for comparison.
	NoContention bool
	Seed         uint64
}

// Summary is what a run did besides its rows.
type Summary struct {
	PrefillIterations, DecodeIterations int64
	KVFlows                             int64
	KVBytes                             int64
	MakespanNs                          int64
}

type replica struct {
	gpus       []int32
	spec       ReplicaSpec
	tpTuner    *nccl.Tuner
	epTuner    *nccl.Tuner
	ppHops     []hop // per stage boundary: the activations' path
	ppPaths    [][]route.DirLink
	id         int        // among all replicas, prefill's first (flow owner of its hops)
	iter       iter       // --pp-flows: the iteration running
	table      layerTable // nil: the roofline alone
	arCache    map[int64]float64
	a2aCache   map[int64]float64
	busy       bool
	queue      []int   // prefill: waiting requests, FIFO
	batch      []int   // prefill: the batch running
	tokens     int64   // prefill: prompt tokens queued and running
	waiting    []int   // decode: KV arrived, not yet in the batch
	running    []int   // decode: the batch
	reserved   int64   // decode: KV tokens the batch will hold at its end
	chunks     []int64 // chunked prefill: batch[k]'s tokens this iteration
	admitted   int     // chunked prefill: requests of queue being prefilled
	load       int     // decode: requests assigned and not completed
	iterations int64
}

// iter is an iteration run stage by stage (--pp-flows): each stage
// computes for stageSec, then sends act bytes to the next as a flow.
type iter struct {
	kind, idx int // the event that ends it
	stage     int // the stage computing, or whose activations are in flight
	stageSec  float64
	act       int64
}

type hop struct {
	bps float64
	lat des.Time
}

type reqState struct {
	Request
	row       requests.Row
	generated int64 // output tokens so far (prefill makes the first)
	prefilled int64 // chunked prefill: prompt tokens done
	admitted  bool  // chunked prefill: counted in its replica's batch
	pending   int   // KV flows in flight
	decode    int
}

// Event kinds, in the order events of one instant run: flows that
// arrived first, then finished iterations, then arrivals.
const (
	evKV = iota
	evPrefillDone
	evDecodeDone
	evMixedDone
	evStage // --pp-flows: a pipeline stage's compute ended
	evArrive
)

type event struct {
	at   des.Time
	kind int
	seq  uint64
	x    int
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	cfg     Config
	t       *stream.Topology
	r       *route.Router
	server  nccl.ServerModel
	net     *network
	q       eventQueue
	seq     uint64
	reqs    []reqState
	prefill []*replica
	decode  []*replica
	sum     Summary
	reps    []*replica // prefill's, then decode's
	flowID  int64
	tuners  map[[2]int]*nccl.Tuner
	err     error // the first error of a handler
}

// Run simulates serving reqs (in arrival order) on topology t and
// returns one row per request, in request id order.
func Run(t *stream.Topology, cfg Config, reqs []Request) ([]requests.Row, Summary, error) {
	if cfg.Prefill.Count < 1 {
		return nil, Summary{}, fmt.Errorf("--prefill %s: at least one replica prefills", cfg.Prefill)
	}
	if err := cfg.Prefill.check("prefill", &cfg.Model); err != nil {
		return nil, Summary{}, err
	}
	if err := cfg.Decode.check("decode", &cfg.Model); err != nil {
		return nil, Summary{}, err
	}
	need := cfg.Prefill.Count*cfg.Prefill.GPUs() + cfg.Decode.Count*cfg.Decode.GPUs()
	if len(cfg.GPUs) != need {
		return nil, Summary{}, fmt.Errorf("the deployment needs %d GPUs, the placement gives %d", need, len(cfg.GPUs))
	}
	seen := map[int32]bool{}
	for _, g := range cfg.GPUs {
		if g < 0 || int(g) >= t.GPUs {
			return nil, Summary{}, fmt.Errorf("--place: GPU %d is not one of the topology's GPUs 0-%d", g, t.GPUs-1)
		}
		if seen[g] {
			return nil, Summary{}, fmt.Errorf("--place: GPU %d is given twice", g)
		}
		seen[g] = true
	}
	if cfg.Chunk < 0 || (cfg.Chunk > 0 && cfg.Decode.Count > 0) {
		return nil, Summary{}, fmt.Errorf("--chunk %d: chunked prefill is for colocated serving (--decode 0)", cfg.Chunk)
	}
	if cfg.MaxBatch < 1 || cfg.PrefillTokens < 1 || cfg.KVTokens < 0 {
		return nil, Summary{}, fmt.Errorf("--max-batch and --prefill-tokens must be at least 1, --kv-tokens at least 0")
	}
	r, err := route.New(t)
	if err != nil {
		return nil, Summary{}, err
	}
	server, err := nccl.ModelFromTopology(t)
	if err != nil {
		return nil, Summary{}, err
	}
	s := &sim{cfg: cfg, t: t, r: r, server: server, net: newNetwork(r), tuners: map[[2]int]*nccl.Tuner{}}
	s.net.alone = cfg.NoContention
	rank := 0
	for _, grp := range []struct {
		spec ReplicaSpec
		dst  *[]*replica
	}{{cfg.Prefill, &s.prefill}, {cfg.Decode, &s.decode}} {
		for range grp.spec.Count {
			rep, err := s.newReplica(grp.spec, cfg.GPUs[rank:rank+grp.spec.GPUs()])
			if err != nil {
				return nil, Summary{}, err
			}
			rep.id = len(s.reps)
			s.reps = append(s.reps, rep)
			*grp.dst = append(*grp.dst, rep)
			rank += grp.spec.GPUs()
		}
	}
	s.reqs = make([]reqState, len(reqs))
	for i, q := range reqs {
		// Bounds the products below: no int64 overflow from absurd shapes.
		if float64(q.Prefill+q.Decode)*float64(cfg.Model.KVBytesPerToken()) > 1<<50 {
			return nil, Summary{}, fmt.Errorf("request %d: a KV cache of %d tokens of %s exceeds 1 PiB", q.ID, q.Prefill+q.Decode, cfg.Model.Name)
		}
		s.reqs[i] = reqState{Request: q}
		s.reqs[i].row = requests.Row{RequestID: q.ID, PrefillTokens: q.Prefill, DecodeTokens: q.Decode, ArrivalNs: q.Arrival.Ns()}
		s.push(q.Arrival, evArrive, i)
	}
	if err := s.loop(); err != nil {
		return nil, Summary{}, err
	}
	rows := make([]requests.Row, len(s.reqs))
	for i := range s.reqs {
		rows[i] = s.reqs[i].row
		requests.Fill(&rows[i])
		s.sum.MakespanNs = max(s.sum.MakespanNs, rows[i].CompletedNs)
	}
	for _, rep := range s.prefill {
		s.sum.PrefillIterations += rep.iterations
	}
	for _, rep := range s.decode {
		s.sum.DecodeIterations += rep.iterations
	}
	return rows, s.sum, nil
}

func (s *sim) tuner(n int, gpus []int32) *nccl.Tuner {
	servers := map[int32]bool{}
	for _, g := range gpus {
		servers[g/int32(s.t.GPUsPerServer)] = true
	}
	key := [2]int{n, len(servers)}
	if t, ok := s.tuners[key]; ok {
		return t
	}
	t := nccl.NewTuner(s.server, n, len(servers))
	s.tuners[key] = t
	return t
}

func (s *sim) newReplica(spec ReplicaSpec, gpus []int32) (*replica, error) {
	rep := &replica{gpus: gpus, spec: spec, arCache: map[int64]float64{}, a2aCache: map[int64]float64{}}
	if s.cfg.Table != nil {
		lt, err := s.cfg.Table.forReplica(&s.cfg.Model, spec.TP)
		if err != nil {
			return nil, err
		}
		rep.table = lt
	}
	if spec.TP > 1 {
		rep.tpTuner = s.tuner(spec.TP, gpus[:spec.TP])
	}
	if spec.EP > 1 {
		rep.epTuner = s.tuner(spec.EP, gpus[:spec.EP])
	}
	for b := 1; b < spec.PP; b++ {
		src, dst := gpus[(b-1)*spec.TP], gpus[b*spec.TP]
		p, err := s.r.Path(src, dst, route.FlowHash(src, dst, 0, s.cfg.Seed))
		if err != nil {
			return nil, fmt.Errorf("pipeline stage %d to %d: %v", b-1, b, err)
		}
		rep.ppHops = append(rep.ppHops, hop{s.r.Bottleneck(p), s.r.Latency(p)})
		rep.ppPaths = append(rep.ppPaths, p)
	}
	return rep, nil
}

func (s *sim) push(at des.Time, kind, x int) {
	if at == des.Never && s.err == nil {
		s.err = fmt.Errorf("the run passed the end of the simulated clock (%s): iterations this slow never finish the trace", des.Never)
	}
	s.seq++
	heap.Push(&s.q, event{at: at, kind: kind, seq: s.seq, x: x})
}

// loop runs events and flow drains in time order until both run out.
func (s *sim) loop() error {
	for {
		tq := des.Never
		if len(s.q) > 0 {
			tq = s.q[0].at
		}
		if tn := s.net.next(); tn < des.Never && tn <= tq {
			s.net.advance(tn)
			s.net.drained(func(owner int, at des.Time) { s.push(at, evKV, owner) })
			continue
		}
		if tq == des.Never {
			break
		}
		e := heap.Pop(&s.q).(event)
		s.net.advance(e.at)
		now := e.at
		switch e.kind {
		case evArrive:
			s.arrive(now, e.x)
		case evPrefillDone:
			if err := s.prefillDone(now, e.x); err != nil {
				return err
			}
		case evKV:
			if e.x < 0 { // a pipeline hop's activations (--pp-flows)
				s.hopArrived(now, -e.x-1)
				break
			}
			s.kvArrived(now, e.x)
		case evStage:
			s.stageDone(now, e.x)
		case evDecodeDone:
			s.decodeDone(now, e.x)
		case evMixedDone:
			s.mixedDone(now, e.x)
		}
		if s.err != nil {
			return s.err
		}
	}
	for i := range s.reqs {
		if s.reqs[i].generated < s.reqs[i].Decode {
			return fmt.Errorf("request %d never completed (a scheduler fault)", s.reqs[i].ID)
		}
	}
	return nil
}

// arrive queues a request at the prefill replica with the fewest prompt
// tokens queued and running (ties: the lowest index).
func (s *sim) arrive(now des.Time, i int) {
	best := s.prefill[0]
	for _, rep := range s.prefill[1:] {
		if rep.tokens < best.tokens {
			best = rep
		}
	}
	idx := 0
	for k, rep := range s.prefill {
		if rep == best {
			idx = k
		}
	}
	s.reqs[i].row.PrefillReplica = int32(idx)
	best.queue = append(best.queue, i)
	best.tokens += s.reqs[i].Prefill
	if !best.busy {
		if s.colocated() {
			s.startMixed(now, idx)
		} else {
			s.startPrefill(now, idx)
		}
	}
}

// colocated: no decode replicas, each replica decodes what it prefilled.
func (s *sim) colocated() bool { return len(s.decode) == 0 }

// startMixed runs one iteration of a colocated replica: a token for each
// request decoding, and the prompts of the queued requests that fit the
// batch (--max-batch counts both), the prefill token budget and the KV
// capacity, in arrival order (iteration-level batching with whole
// prompts, as Orca and vLLM do without chunked prefill).
func (s *sim) startMixed(now des.Time, idx int) {
	rep := s.prefill[idx]
	if s.cfg.Chunk > 0 {
		s.startChunked(now, idx)
		return
	}
	var tokens, attended int64
	n := 0
	for n < len(rep.queue) && len(rep.running)+n < s.cfg.MaxBatch {
		q := &s.reqs[rep.queue[n]]
		if n > 0 && tokens+q.Prefill > s.cfg.PrefillTokens {
			break
		}
		need := q.Prefill + q.Decode
		if s.cfg.KVTokens > 0 && (len(rep.running) > 0 || n > 0) && rep.reserved+need > s.cfg.KVTokens {
			break
		}
		rep.reserved += need
		tokens += q.Prefill
		attended += q.Prefill * (q.Prefill + 1) / 2
		n++
	}
	rep.batch = append(rep.batch[:0], rep.queue[:n]...)
	rep.queue = rep.queue[n:]
	for _, i := range rep.batch {
		s.reqs[i].row.ScheduledNs = now.Ns()
	}
	var ctx int64
	for _, i := range rep.running {
		ctx += s.reqs[i].Prefill + s.reqs[i].generated
	}
	b := int64(len(rep.running))
	if n == 0 && b == 0 {
		rep.busy = false
		return
	}
	rep.busy = true
	rep.iterations++
	s.startIter(now, rep, evMixedDone, idx, tokens+b, attended+ctx, ctx, int64(n)+b)
}

// startChunked is startMixed with chunked prefill: the running requests'
// decode tokens first, then, within --chunk tokens, the queued prompts in
// order, the last one in part; a request is admitted (--max-batch counts
// it, its KV reserved) when its first chunk runs.
func (s *sim) startChunked(now des.Time, idx int) {
	rep := s.prefill[idx]
	b := int64(len(rep.running))
	budget := s.cfg.Chunk - b
	var tokens, attended, read int64
	rep.batch, rep.chunks = rep.batch[:0], rep.chunks[:0]
	for k := 0; k < len(rep.queue) && budget > 0; k++ {
		i := rep.queue[k]
		q := &s.reqs[i]
		if !q.admitted {
			need := q.Prefill + q.Decode
			busy := len(rep.running) + rep.admitted
			if busy >= s.cfg.MaxBatch || (s.cfg.KVTokens > 0 && busy > 0 && rep.reserved+need > s.cfg.KVTokens) {
				break
			}
			q.admitted = true
			rep.admitted++
			rep.reserved += need
			q.row.ScheduledNs = now.Ns()
		}
		c := min(q.Prefill-q.prefilled, budget)
		// Its c new tokens attend to the q.prefilled before them and,
		// causally, to each other.
		attended += c*q.prefilled + c*(c+1)/2
		read += q.prefilled
		tokens += c
		budget -= c
		rep.batch = append(rep.batch, i)
		rep.chunks = append(rep.chunks, c)
	}
	var ctx int64
	for _, i := range rep.running {
		ctx += s.reqs[i].Prefill + s.reqs[i].generated
	}
	seqs := b
	if n := len(rep.batch); n > 0 && s.reqs[rep.batch[n-1]].prefilled+rep.chunks[n-1] == s.reqs[rep.batch[n-1]].Prefill {
		seqs += int64(n) // every prompt of the batch ends here
	} else {
		seqs += int64(max(n-1, 0)) // the last one goes on next time
	}
	if tokens == 0 && b == 0 {
		rep.busy = false
		return
	}
	rep.busy = true
	rep.iterations++
	s.startIter(now, rep, evMixedDone, idx, tokens+b, attended+ctx, read+ctx, seqs)
}

func (s *sim) mixedDone(now des.Time, idx int) {
	rep := s.prefill[idx]
	kept := rep.running[:0]
	for _, i := range rep.running {
		q := &s.reqs[i]
		q.generated++
		if q.generated >= q.Decode {
			q.row.CompletedNs = now.Ns()
			rep.reserved -= q.Prefill + q.Decode
			continue
		}
		kept = append(kept, i)
	}
	rep.running = kept
	finished := rep.batch
	if s.cfg.Chunk > 0 {
		finished = finished[:0]
		for k, i := range rep.batch {
			q := &s.reqs[i]
			q.prefilled += rep.chunks[k]
			if q.prefilled == q.Prefill {
				finished = append(finished, i)
				rep.admitted--
			}
		}
		// The batch is a prefix of the queue, all finished but the last.
		rep.queue = rep.queue[len(finished):]
	}
	for _, i := range finished {
		q := &s.reqs[i]
		rep.tokens -= q.Prefill
		q.generated = 1
		q.row.DecodeReplica = int32(idx)
		q.row.PrefillDoneNs, q.row.KVStartNs, q.row.KVEndNs, q.row.DecodeStartNs = now.Ns(), now.Ns(), now.Ns(), now.Ns()
		if q.Decode == 1 {
			q.row.CompletedNs = now.Ns()
			rep.reserved -= q.Prefill + q.Decode
			continue
		}
		rep.running = append(rep.running, i)
	}
	rep.batch = rep.batch[:0]
	s.startMixed(now, idx)
}

func (s *sim) startPrefill(now des.Time, idx int) {
	rep := s.prefill[idx]
	var tokens, attended int64
	n := 0
	for n < len(rep.queue) && n < s.cfg.MaxBatch {
		p := s.reqs[rep.queue[n]].Prefill
		if n > 0 && tokens+p > s.cfg.PrefillTokens {
			break
		}
		tokens += p
		attended += p * (p + 1) / 2
		n++
	}
	rep.batch = append(rep.batch[:0], rep.queue[:n]...)
	rep.queue = rep.queue[n:]
	for _, i := range rep.batch {
		s.reqs[i].row.ScheduledNs = now.Ns()
	}
	rep.busy = true
	rep.iterations++
	s.startIter(now, rep, evPrefillDone, idx, tokens, attended, 0, int64(n))
}

// prefillDone hands each request of the batch to the decode replica with
// the fewest requests assigned (ties: the lowest index) and starts its KV
// transfer: the cache split evenly over the prefill replica's GPUs, shard
// k going to the decode replica's GPU k mod its GPUs.
func (s *sim) prefillDone(now des.Time, idx int) error {
	rep := s.prefill[idx]
	for _, i := range rep.batch {
		q := &s.reqs[i]
		rep.tokens -= q.Prefill
		q.generated = 1
		q.row.PrefillDoneNs = now.Ns()
		q.row.KVStartNs = now.Ns()
		if q.Decode == 1 { // done: prefill made the only token
			q.row.KVEndNs, q.row.DecodeStartNs, q.row.CompletedNs = now.Ns(), now.Ns(), now.Ns()
			continue
		}
		d := 0
		for k, dr := range s.decode {
			if dr.load < s.decode[d].load {
				d = k
			}
		}
		dr := s.decode[d]
		dr.load++
		q.decode = d
		q.row.DecodeReplica = int32(d)
		total := s.cfg.Model.KVBytes(q.Prefill)
		q.row.KVBytes = total
		s.sum.KVBytes += total
		shards := int64(len(rep.gpus))
		for k, src := range rep.gpus {
			size := total / shards
			if int64(k) < total%shards {
				size++
			}
			if size == 0 {
				continue
			}
			dst := dr.gpus[k%len(dr.gpus)]
			s.flowID++
			path, err := s.r.Path(src, dst, route.FlowHash(src, dst, s.flowID, s.cfg.Seed))
			if err != nil {
				return fmt.Errorf("request %d: KV transfer GPU %d to %d: %v", q.ID, src, dst, err)
			}
			s.net.add(i, path, size)
			q.pending++
			s.sum.KVFlows++
		}
	}
	rep.batch = rep.batch[:0]
	rep.busy = false
	if len(rep.queue) > 0 {
		s.startPrefill(now, idx)
	}
	return nil
}

func (s *sim) kvArrived(now des.Time, i int) {
	q := &s.reqs[i]
	q.pending--
	if q.pending > 0 {
		return
	}
	q.row.KVEndNs = now.Ns()
	dr := s.decode[q.decode]
	dr.waiting = append(dr.waiting, i)
	if !dr.busy {
		s.startDecode(now, q.decode)
	}
}

// startDecode admits waiting requests up to the batch limit (continuous
// batching: requests join and leave at iteration boundaries) and runs one
// iteration: one token for every request of the batch.
func (s *sim) startDecode(now des.Time, idx int) {
	rep := s.decode[idx]
	for len(rep.waiting) > 0 && len(rep.running) < s.cfg.MaxBatch {
		i := rep.waiting[0]
		need := s.reqs[i].Prefill + s.reqs[i].Decode
		if s.cfg.KVTokens > 0 && len(rep.running) > 0 && rep.reserved+need > s.cfg.KVTokens {
			break // first come, first served: no overtaking
		}
		rep.waiting = rep.waiting[1:]
		rep.reserved += need
		s.reqs[i].row.DecodeStartNs = now.Ns()
		rep.running = append(rep.running, i)
	}
	if len(rep.running) == 0 {
		rep.busy = false
		return
	}
	var ctx int64
	for _, i := range rep.running {
		ctx += s.reqs[i].Prefill + s.reqs[i].generated
	}
	b := int64(len(rep.running))
	rep.busy = true
	rep.iterations++
	s.startIter(now, rep, evDecodeDone, idx, b, ctx, ctx, b)
}

func (s *sim) decodeDone(now des.Time, idx int) {
	rep := s.decode[idx]
	kept := rep.running[:0]
	for _, i := range rep.running {
		q := &s.reqs[i]
		q.generated++
		if q.generated >= q.Decode {
			q.row.CompletedNs = now.Ns()
			rep.load--
			rep.reserved -= q.Prefill + q.Decode
			continue
		}
		kept = append(kept, i)
	}
	rep.running = kept
	s.startDecode(now, idx)
}

// iterTime is one forward pass of rep: the roofline time of its compute
// on TP GPUs, two TP AllReduces of the activations per layer (NCCL's
// tuning model), two EP AllToAlls per MoE layer (dispatch and combine,
// each EP rank sending its share of the tokens' top-k copies), and the
// activations sent between pipeline stages (bytes / path bottleneck +
// latency).
func (s *sim) iterTime(rep *replica, newTokens, attended, ctx, seqs int64) des.Time {
	return des.FromSeconds(s.iterSeconds(rep, newTokens, attended, ctx, seqs, true))
}

// startIter starts an iteration of rep that ends with event kind for idx:
// at once its whole time, or with --pp-flows stage by stage, each stage
// an equal share of the compute and collectives (the layers split evenly)
// and the activations sent on as flows.
func (s *sim) startIter(now des.Time, rep *replica, kind, idx int, newTokens, attended, ctx, seqs int64) {
	if !s.cfg.PPFlows || len(rep.ppPaths) == 0 {
		s.push(now.Add(s.iterTime(rep, newTokens, attended, ctx, seqs)), kind, idx)
		return
	}
	sec := s.iterSeconds(rep, newTokens, attended, ctx, seqs, false)
	rep.iter = iter{kind: kind, idx: idx, stageSec: sec / float64(rep.spec.PP), act: newTokens * s.cfg.Model.Hidden * s.cfg.Model.DTypeBytes}
	s.push(now.Add(des.FromSeconds(rep.iter.stageSec)), evStage, rep.id)
}

// stageDone: the last stage ends the iteration; another sends its
// activations to the next stage.
func (s *sim) stageDone(now des.Time, id int) {
	rep := s.reps[id]
	it := &rep.iter
	if it.stage == rep.spec.PP-1 {
		it.stage = 0
		s.push(now, it.kind, it.idx)
		return
	}
	s.net.add(-id-1, rep.ppPaths[it.stage], max(it.act, 1))
	it.stage++
}

// hopArrived starts the next stage's compute.
func (s *sim) hopArrived(now des.Time, id int) {
	rep := s.reps[id]
	s.push(now.Add(des.FromSeconds(rep.iter.stageSec)), evStage, id)
}

// iterSeconds is iterTime in seconds, the pipeline hops left out unless
// hops.
func (s *sim) iterSeconds(rep *replica, newTokens, attended, ctx, seqs int64, hops bool) float64 {
	m := &s.cfg.Model
	w := m.Iteration(newTokens, attended, ctx, seqs)
	var sec float64
	if rep.table != nil {
		sec = tableSeconds(rep.table, s.cfg.Roof, m, w, newTokens, rep.spec.TP)
	} else {
		sec = iterationSeconds(s.cfg.Roof, w, rep.spec.TP)
	}
	act := newTokens * m.Hidden * m.DTypeBytes
	if rep.tpTuner != nil {
		us, ok := rep.arCache[act]
		if !ok {
			var err error
			if _, _, us, err = rep.tpTuner.Select(nccl.AllReduce, act); err != nil && s.err == nil {
				s.err = fmt.Errorf("TP AllReduce of %d bytes: %v", act, err)
			}
			rep.arCache[act] = us
		}
		sec += float64(2*m.Layers) * us * 1e-6
	}
	if rep.epTuner != nil {
		size := max(act*m.TopK/int64(rep.spec.EP), 1)
		us, ok := rep.a2aCache[size]
		if !ok {
			us = nccl.AllToAllTime(s.server, rep.epTuner, size)
			rep.a2aCache[size] = us
		}
		sec += float64(2*m.Layers) * us * 1e-6
	}
	if hops {
		for _, h := range rep.ppHops {
			sec += float64(act)*8/h.bps + h.lat.Seconds()
		}
	}
	if !(sec < 1e5) && s.err == nil { // also NaN
		s.err = fmt.Errorf("an iteration of %s over %d tokens would take %.3g s: check the model and --peak-tflops/--hbm-bw", m.Name, newTokens, sec)
		return 0
	}
	return sec
}
