// Package errtext shapes the text of the formats' errors: one line each,
// with found values cut to a readable length.
package errtext

import "strings"

// Clip shortens a found value for an error message.
func Clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// OneLine flattens a third-party error so that our errors stay single-line.
func OneLine(err error) string {
	s := err.Error()
	if strings.ContainsAny(s, "\r\n") {
		s = strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", "; ").Replace(s)), " ")
	}
	return s
}
