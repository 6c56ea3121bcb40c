package packet

import "github.com/fabricsim/fabricsim/pkg/des"

// The optional parts' wiring into the core. Each is reached only through
// flags it sets when it is on, so a run without it never calls it, and the
// calls are concrete (no hook table on the per-packet path).
//
// The surrogate (surrogate.go; nil without --surrogate). Its flags, set by
// SetSurrogate and its switches: surWatch (it follows queue pairs, NIC
// ports and deliveries), bypassing (open: packets leaving NICs go to its
// predictor), suspended (the fabric is frozen), surCount (it counts the
// transfers in progress). The core calls it at:
//   - the loop: held events while suspended (hold), its own events (event);
//   - the NIC: a queue pair slot made or opened (addQP, openQP), a data
//     packet sent (sent), a transfer or an acknowledgement bypassing the
//     fabric (bypasses, bypassFlow, bypass);
//   - the fabric: a packet leaving its NIC while open (nicTime, bypass),
//     one delivered (track), a zombie packet leaving the fabric
//     (freeZombie), a failed link (linkDown);
//   - the flows: a transfer started or finished (transfersInProgress).
//
// Partitioning (partition.go): a Sim is a part of a partitioned run only
// when pv.part is set; the core then sends what crosses to another part
// through pv (abroad, sendAway, post) and keeps queue pair slots for good
// (nic.recycle).

// event handles the surrogate's own events: its opening and closing, a
// packet its predictor delivers, the ends of its sampling windows.
func (sg *surrogate) event(ev des.Event) error {
	switch ev.Kind {
	case evSurrogate:
		return sg.surrogateSwitch(ev.Arg == 1)
	case evBypass:
		if ev.Arg == zombieList {
			sg.zombieNext()
			break
		}
		sg.onBypass(ev.Target, ev.Arg == 1)
	case evSurrogateSample:
		return sg.surrogateSample()
	case evBacklogSample:
		sg.backlogSample(ev.Arg)
	}
	return nil
}

// zombieList, as an evBypass's Arg: the head of the zombie list
// (zombieNext); 1 is a zombie's copy, 0 a packet.
const zombieList = 2

// linkDown forgets what the surrogate learned of the queue pairs' paths:
// their routes may cross the link that failed.
func (sg *surrogate) linkDown() { sg.pairs.reset() }
