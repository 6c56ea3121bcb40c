//go:build !race

package packet

const raceDetector = false
