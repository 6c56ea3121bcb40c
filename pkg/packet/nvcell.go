package packet

import (
	"github.com/fabricsim/fabricsim/formats/stream"
	"github.com/fabricsim/fabricsim/pkg/route"
)

// NVLink cells (issue 30). NVLink moves a GPU's writes 256 data bytes a
// request, so the channels writing through one GPU's NVLink port share it
// write by write, as the analytical backends share it. A packet of
// PACKET_PAYLOAD_SIZE (9000 bytes by default) holds a small transfer whole:
// an LL ring step on a channel (8 KiB on the wire) is one packet, the port
// serialises the channels' steps one after another, and the channels drift
// apart, each step's latency overlapping the others' bytes, which made
// packet 0.94 and 0.89 of fluid at 256 and 512 KiB AllReduce on one DGX
// A100 (tests TestLLNVLinkPacketGranularity).
//
// A queue pair of an NCCL transport step (a transfer with a pace, the
// stream's pace_ps, so streams without --transport are untouched) whose
// path is NVLink only therefore sends its part in cells: about nvCells of
// them, at least nvCellMin bytes each, and only where that is smaller than
// the packet it would otherwise send, so that no transfer takes more than
// nvCells packets more than it did (event counts stay bounded; transfers
// of nvCells full packets or more are as before). A cell carries its share
// of a packet's headers and acknowledges as the packets it stands for
// would (every L2_ACK_INTERVAL packets' worth of bytes), so the wire bytes
// and the ACK load stay what they were: only the interleaving changes.
// Cells are off where packets may be placed out of order (per-packet
// routing, TRANSPORT sack, whose bookkeeping counts whole payloads) and
// under the surrogate (whose predictions are per payload). With 16 cells
// packet is within 2% of fluid on that server from 64 KiB to 8 GiB; with
// 8 a transfer's few cells still let the channels drift (0.965 at 8 MiB).
const (
	nvCellMin = 256 // NVLink's write request: its most data bytes
	nvCells   = 16  // about how many cells a queue pair's part is cut into
)

// cellFor is the payload of the cells transfer i's queue pair of size
// bytes sends on data path fwd, or 0 for PACKET_PAYLOAD_SIZE packets.
func (nc *nic) cellFor(i int32, size int64, fwd []route.DirLink) uint16 {
	s := nc.s
	f := s.flows
	if f.set == nil || nc.placed != nil || s.surWatch || f.rec(i).PaceNs == 0 {
		return 0
	}
	cell := (size + nvCells - 1) / nvCells
	cell = max(nvCellMin, (cell+nvCellMin-1)/nvCellMin*nvCellMin)
	if cell >= int64(s.cfg.PayloadSize) || cell >= size || cell > 1<<15 {
		return 0
	}
	for _, dl := range fwd {
		if s.t.Links[dl.Link()].Kind != stream.LinkNVLink {
			return 0
		}
	}
	return uint16(cell)
}

// payload is the most data bytes one of queue pair q's packets carries.
func (nc *nic) payload(q *qp) int64 {
	if q.cell != 0 {
		return int64(q.cell)
	}
	return int64(nc.s.cfg.PayloadSize)
}

// header is the header bytes of a data packet of q carrying size bytes: a
// cell's share of a packet's.
func (nc *nic) header(q *qp, size int64) int32 {
	h := int64(nc.s.cfg.HeaderBytes)
	if q.cell != 0 {
		pay := int64(nc.s.cfg.PayloadSize)
		h = (h*size + pay - 1) / pay
	}
	return int32(h)
}

// cellAcks is how many packets' worth of q's bytes a cell ending at byte
// end (of size bytes) completes: what the receiver counts towards
// L2_ACK_INTERVAL.
func (nc *nic) cellAcks(end, size int64) int32 {
	pay := int64(nc.s.cfg.PayloadSize)
	return int32(end/pay - (end-size)/pay)
}
