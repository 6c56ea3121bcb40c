package cc

// none is CC_MODE 0: no congestion control. A queue pair sends at line rate,
// limited only by its window (BaseWin); no timers, ECN or INT. Useful
// as the uncontrolled baseline and for lossless-fabric studies where PFC
// alone throttles senders. It uses no private State fields.
type none struct{}

func (none) Name() string                            { return "none" }
func (none) Init(s *State)                           { start(s) }
func (none) OnFeedback(s *State, fb *Feedback) int64 { return 0 }
func (none) OnTimer(s *State, now int64) int64       { return 0 }
func (none) UsesECN() bool                           { return false }
func (none) UsesINT() bool                           { return false }
