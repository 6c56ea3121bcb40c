package analytical

import (
	"math"
	"testing"
)

// A paced AllToAll's pieces are hashed anew, each taking the longer of
// its pace and its bytes on its own path: hand-counted draws of two
// connections of one path length (ps per byte beyond the NICs).
// Draw 1 puts one on a free path (0) and one behind a collision (4),
// draw 2 both at 2: extra is the mean of the class means, (2+2)/2 = 2.
// Paced at 3, draw 1's pieces take 3 and 4 (mean 3.5), draw 2's 3 and 3:
// 3.25, where max(pace, extra) said 3.
func TestPacedExtraPieceByPiece(t *testing.T) {
	d := &demand{draws: []pieceDraw{
		{conns: []pieceConn{{b: 0, x: 1, hops: 4}, {b: 4, x: 1, hops: 4}}},
		{conns: []pieceConn{{b: 2, x: 1, hops: 4}, {b: 2, x: 1, hops: 4}}},
	}}
	var cl classSums
	for _, c := range []struct{ pace, want float64 }{{0, 2}, {3, 3.25}, {1, 2.25}, {5, 5}} {
		if got := d.pacedExtra(c.pace, &cl); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("pace %g: %g ps per byte, want %g", c.pace, got, c.want)
		}
	}
	// The slowest class paces the collective: a longer path whose one
	// connection waits 6 beats the other class's mean; so does a busier
	// NIC port (7), which a connection keeps from piece to piece.
	d = &demand{draws: []pieceDraw{{conns: []pieceConn{{b: 0, x: 3, hops: 4}, {b: 6, x: 1, hops: 6}}}}}
	if got := d.pacedExtra(1, &cl); got != 6 {
		t.Errorf("two classes: %g, want 6", got)
	}
	d.draws[0].ports = 7
	if got := d.pacedExtra(1.5, &cl); got != 7 {
		t.Errorf("busier port: %g, want 7", got)
	}
}
