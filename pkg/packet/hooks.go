package packet

import "github.com/fabricsim/fabricsim/pkg/des"

// The surrogate's wiring into the core (its workings are surrogate.go's):
// the core calls it only under the flags SetSurrogate and its switches set
// (Sim.surWatch, bypassing, suspended, surCount), so a run without
// --surrogate never reaches it.

// event handles the surrogate's own events: its opening and closing, a
// packet its predictor delivers, the ends of its sampling windows.
func (sg *surrogate) event(ev des.Event) error {
	switch ev.Kind {
	case evSurrogate:
		return sg.surrogateSwitch(ev.Arg == 1)
	case evBypass:
		sg.onBypass(ev.Target, ev.Arg == 1)
	case evSurrogateSample:
		return sg.surrogateSample()
	case evBacklogSample:
		sg.backlogSample(ev.Arg)
	}
	return nil
}

// linkDown forgets what the surrogate learned of the queue pairs' paths:
// their routes may cross the link that failed.
func (sg *surrogate) linkDown() { sg.pairs.reset() }
