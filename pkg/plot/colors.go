package plot

import (
	"image/color"

	"github.com/fabricsim/fabricsim/formats/stream"
)

// connColors gives every conn_type the same colour in every plot, from
// Okabe and Ito's colour-blind-safe palette (the two PXN kinds, rarer, in
// darker tones of its yellow and blue); other names take the palette in
// order. "all" is black and drawn dashed under the others.
var connColors = map[string]color.Color{
	"RING": okabeIto[1], "TREE": okabeIto[3], "NVLS": okabeIto[0], "NET": okabeIto[2],
	"A2A": okabeIto[4], "P2P": okabeIto[5],
	"PXN_INIT": color.RGBA{0x99, 0x80, 0x00, 0xff}, "PXN_FINAL": color.RGBA{0x00, 0x3f, 0x66, 0xff},
	"MSCCL": color.Gray{Y: 100}, stream.ConnDelay: color.Gray{Y: 160}, "all": color.Black,
}

func seriesColor(name string, i int) color.Color {
	if c, ok := connColors[name]; ok {
		return c
	}
	return okabeItoAt(i)
}

// okabeIto is Okabe and Ito's colour-blind-safe palette (black omitted).
var okabeIto = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	color.RGBA{0xf0, 0xe4, 0x42, 0xff}, // yellow
}

// okabeItoAt is the i-th Okabe-Ito colour, round the palette.
func okabeItoAt(i int) color.Color { return okabeIto[i%len(okabeIto)] }
