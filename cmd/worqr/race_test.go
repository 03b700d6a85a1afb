//go:build race

package main

// The binary is built with the race detector when the tests are, so that
// -race checks the command's own goroutines too (a race exits 66).
func init() { buildFlags = append(buildFlags, "-race") }
