package worqr

import "github.com/worqr/worqr/worqrtype"

// A task's history of failed attempts (see worqrtype.Attempt).
type (
	// AttemptEnd is how a failed attempt at a task ended (see
	// worqrtype.AttemptEnd).
	AttemptEnd = worqrtype.AttemptEnd
	// Attempt is one failed attempt at a task, in its history (see
	// worqrtype.Attempt).
	Attempt = worqrtype.Attempt
)

// How attempts end, in a task's history (see worqrtype.AttemptRetried).
const (
	AttemptRetried   = worqrtype.AttemptRetried   // the task went back to wait for another
	AttemptDead      = worqrtype.AttemptDead      // the task went to the dead letters
	AttemptReclaimed = worqrtype.AttemptReclaimed // the worker was lost and the task given back
)

// MaxAttemptHistory is how many attempts a task's history keeps: the last
// ones, older ones dropped.
const MaxAttemptHistory = 10

// MaxAttemptErrorLen is the longest error text an attempt in a history
// keeps, in bytes (a rune cut at the bound is dropped whole).
const MaxAttemptErrorLen = 1024
