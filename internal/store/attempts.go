package store

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// How an attempt in a task's history ended (see Attempt).
const (
	AttemptRetried   = 'r' // failed and went back to wait, at once or delayed
	AttemptDead      = 'd' // failed and went to the dead letters
	AttemptReclaimed = 'k' // its worker was lost and a peer gave the task back
)

// Attempt is one failed attempt in a task's history, as attempt_note
// (internal/scripts/common/failures.lua) writes it in the errors hash
// (field '<id>:a').
type Attempt struct {
	Ended  int64 // when it ended (ms, Redis clock)
	How    byte  // AttemptRetried, AttemptDead or AttemptReclaimed
	Worker string
	Error  string // cut to ATTEMPT_ERROR_MAX bytes, so it may end in a cut rune
}

// AttemptsField is the errors hash's field of task id's attempt history.
func AttemptsField(id string) string { return id + ":a" }

// ParseAttempts reads an attempt history, oldest first. A malformed
// record ends it: what came before it is returned.
func ParseAttempts(v string) []Attempt {
	var out []Attempt
	for v != "" {
		head, rest, ok := strings.Cut(v, ":")
		if !ok {
			break
		}
		f := strings.Split(head, ",")
		if len(f) != 4 || len(f[1]) != 1 {
			break
		}
		ended, err1 := strconv.ParseInt(f[0], 10, 64)
		wl, err2 := strconv.Atoi(f[2])
		el, err3 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || err3 != nil || wl < 0 || el < 0 || wl+el > len(rest) {
			break
		}
		e := rest[wl : wl+el]
		// A rune cut at the bound: at most utf8.UTFMax-1 bytes of it.
		for i := 1; i < utf8.UTFMax && e != ""; i++ {
			if r, size := utf8.DecodeLastRuneInString(e); r != utf8.RuneError || size != 1 {
				break
			}
			e = e[:len(e)-1]
		}
		out = append(out, Attempt{Ended: ended, How: f[1][0], Worker: rest[:wl], Error: e})
		v = rest[wl+el:]
	}
	return out
}
