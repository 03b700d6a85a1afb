package store

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/worqrtype"
)

// A queue's stats hash (QueueKeys.Stats), written by the scripts (see
// stats_flush in common/stats.lua) with their own counts and those the client
// counted (statsbuf.go), holds two rings of time slots: minute slots
// m0..m359 (the last 6 hours) and hour slots h0..h167 (the last 7 days).
// Slot i of the minute ring holds the minute M (minutes since the Unix
// epoch, by the Redis clock) with M mod 360 = i; its stamp field "m<i>"
// is M, and its values are the fields "m<i>:<name>"; the hour ring the
// same. Scripts write the current minute only, in the fields "c:<name>",
// and "cur" is the minute they hold. The first write of a new minute moves
// them to minute cur's slot (clearing it first) and adds them to its hour's
// slot (clearing that first if it held an older hour), so the hash never
// grows past the two rings and needs no EXPIRE, and every minute but cur
// is counted in the rings. A reader skips slots whose stamp is out of the
// ring's window and adds minute cur to both.
//
// Value names: the counters (StatCounters, one letter each), the
// histogram buckets "w<k>" (wait) and "u<k>" (run), counting durations v
// µs with 2^(k-1) < v <= 2^k (k = 0 for v <= 1 µs; the last bucket,
// HistogramBuckets-1, also holds everything longer), the sums "ws"
// and "us" (µs), and the counts of a kind of tasks: "f/<kind>" finished,
// "r/<kind>" retried, "d/<kind>" dead. The field "kinds" lists the kinds
// kept apart (at most StatsKinds; see stats_kinds_map in common/stats.lua).
const (
	StatsMinutes     = 360                        // slots of the minute ring
	StatsHours       = 168                        // slots of the hour ring
	HistogramBuckets = worqrtype.HistogramBuckets // buckets per histogram (k = 0..36)
)

// StatCounters are the counters' one-letter names, in the order of
// StatsSlot.Counts: names of the stats hash's own, unrelated to the
// header letters of task entries (see records.go for why "r" is not
// renamed).
const StatCounters = "esfrqdkx"

// The counters' indexes in StatsSlot.Counts.
const (
	StatEnqueued  = iota // enqueued (Enqueue and periodic ticks)
	StatStarted          // dequeued
	StatFinished         // finished (active processes only)
	StatRetried          // retried (a handler error, Process.Retry)
	StatRequeued         // back to waiting without a failure: Process.Requeue, a worker giving its work back, dead letters requeued
	StatDead             // moved to the dead letters (poison pills too)
	StatReclaimed        // returned to the queue from a dead worker
	StatCancelled        // cancelled while waiting, delayed or in flight
)

// StatsSlot is one time slot of a queue's stats.
type StatsSlot struct {
	Hour  bool      // a slot of the hour ring, else of the minute ring
	Start time.Time // the start of the minute (hour) it holds
	// Counts by StatEnqueued etc.
	Counts [len(StatCounters)]int64
	// Wait and Run are the histograms, WaitSum and RunSum their sums (µs).
	Wait, Run       [HistogramBuckets]int64
	WaitSum, RunSum int64
	// Kinds are the counts of the tasks of each kind (StatsOtherKind
	// those of kinds past the bound), by KindFinished etc.; nil when no
	// task with a kind ended.
	Kinds map[string][3]int64
}

// The indexes of a kind's counts in StatsSlot.Kinds, and their letters.
const (
	KindFinished = iota
	KindRetried
	KindDead
	kindLetters = "frd"
)

// statsNearMinutes is how many minutes back a read of recent minutes
// names its fields (HMGET) rather than reading the whole hash.
const statsNearMinutes = 10

// statsValueNames are the value names a slot can have (see common/stats.lua).
var statsValueNames = func() []string {
	names := []string{"ws", "us"}
	for _, c := range StatCounters {
		names = append(names, string(c))
	}
	for k := range HistogramBuckets {
		names = append(names, "w"+strconv.Itoa(k), "u"+strconv.Itoa(k))
	}
	return names
}()

// Stats reads a queue's stats: the Redis clock and every slot that holds
// data of its ring's window, each ring oldest first (minutes, then hours).
// With since set less than 10 minutes ago (by this machine's clock) it
// reads only the minutes since then, with one HMGET of their fields and
// the current minute's, instead of the whole hash (a few hundred kB for a
// busy queue): hours are then left out, and minutes from a few before
// since may be given.
func (s *Store) Stats(ctx context.Context, queue string, since time.Time) (now time.Time, slots []StatsSlot, err error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return time.Time{}, nil, err
	}
	k := s.queueKeys(queue)
	var names, near []string
	read := s.b().Hgetall().Key(k.Stats).Build().Pin()
	if local := s.clock.Now(); !since.IsZero() && local.Sub(since) < statsNearMinutes*time.Minute {
		// A minute of margin each side for the two clocks.
		near = append(near, "c")
		for m := since.Unix()/60 - 1; m <= local.Unix()/60+1; m++ {
			near = append(near, "m"+strconv.FormatInt(m%StatsMinutes, 10))
		}
		// "kinds" too: a queue that keeps kinds apart has their fields
		// read by a second HMGET.
		names = append(names, "cur", "kinds")
		names = statsFieldNames(names, near, statsValueNames)
		read = s.b().Hmget().Key(k.Stats).Field(names...).Build().Pin()
	}
	// Two calls, not one DoMulti: on a cluster whose node cannot be
	// reached, rueidis retries a multi until the context ends, where a
	// single call fails at once (ErrUnavailable, as every other read).
	t, err := s.rdb.Do(ctx, s.b().Time().Build().Pin()).AsStrSlice()
	if err == nil && len(t) != 2 {
		err = fmt.Errorf("TIME answered %d values", len(t))
	}
	if err != nil {
		return time.Time{}, nil, err
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	usec, err2 := strconv.ParseInt(t[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, nil, fmt.Errorf("TIME answered %q", t)
	}
	now = time.Unix(sec, usec*1000)
	got := s.rdb.Do(ctx, read)
	var fields map[string]string
	if names == nil {
		fields, err = got.AsStrMap()
	} else {
		fields = make(map[string]string)
		err = hmgetInto(fields, names, got)
		if kinds := statsKindsListed(fields["kinds"]); err == nil && len(kinds) > 0 {
			var kindNames []string
			for _, kind := range append(kinds, StatsOtherKind) {
				for _, l := range kindLetters {
					kindNames = append(kindNames, string(l)+"/"+kind)
				}
			}
			more := statsFieldNames(nil, near, kindNames)
			err = hmgetInto(fields, more, s.rdb.Do(ctx, s.b().Hmget().Key(k.Stats).Field(more...).Build()))
		}
	}
	if err != nil {
		return time.Time{}, nil, err
	}
	return now, ParseStats(now, fields), nil
}

// ParseStats decodes a stats hash read at now (by the Redis clock): the
// slots in their ring's window that hold data, minutes then hours, each
// oldest first. The current minute ("c" and "cur"), not yet in the rings,
// is added to both here. Fields it does not know are skipped.
func ParseStats(now time.Time, fields map[string]string) []StatsSlot {
	minute := now.Unix() / 60
	hour := minute / 60
	stamps := map[string]int64{}
	for f, v := range fields {
		if strings.IndexByte(f, ':') >= 0 || len(f) < 2 || (f[0] != 'm' && f[0] != 'h') {
			continue
		}
		stamp, err1 := strconv.ParseInt(v, 10, 64)
		i, err2 := strconv.Atoi(f[1:])
		if err1 != nil || err2 != nil || i < 0 {
			continue
		}
		if (f[0] == 'm' && i < StatsMinutes && stamp%StatsMinutes == int64(i)) || (f[0] == 'h' && i < StatsHours && stamp%StatsHours == int64(i)) {
			stamps[f] = stamp
		}
	}
	// The current minute's slot "c" holds minute cur.
	if cur, err := strconv.ParseInt(fields["cur"], 10, 64); err == nil && cur >= 0 {
		stamps["c"] = cur
	}
	// Every slot's values, by slot name.
	values := map[string]*StatsSlot{}
	for f, v := range fields {
		slot, name, ok := strings.Cut(f, ":")
		if !ok || name == "" {
			continue
		}
		if _, ok := stamps[slot]; !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			// Scripts pass numbers to Redis as numbers, which it prints
			// with an exponent past 10^17 (a sum of µs, at most).
			f, ferr := strconv.ParseFloat(v, 64)
			if ferr != nil {
				continue
			}
			n = int64(f)
		}
		st := values[slot]
		if st == nil {
			st = &StatsSlot{}
			values[slot] = st
		}
		st.add(name, n)
	}
	var out []StatsSlot
	minutes, hours := map[int64]*StatsSlot{}, map[int64]*StatsSlot{}
	for slot, stamp := range stamps {
		st := values[slot]
		if st == nil {
			continue
		}
		if slot == "c" {
			if h := stamp / 60; h <= hour && hour-h < StatsHours {
				if hours[h] == nil {
					hours[h] = &StatsSlot{Hour: true, Start: time.Unix(h*3600, 0)}
				}
				hours[h].merge(st)
			}
		}
		switch {
		case slot[0] == 'c' && stamp <= minute && minute-stamp < StatsMinutes:
			m := *st
			m.Kinds = maps.Clone(st.Kinds)
			m.Start = time.Unix(stamp*60, 0)
			minutes[stamp] = &m
		case slot[0] == 'm' && stamp <= minute && minute-stamp < StatsMinutes:
			if minutes[stamp] == nil {
				minutes[stamp] = &StatsSlot{Start: time.Unix(stamp*60, 0)}
			}
			minutes[stamp].merge(st)
		case slot[0] == 'h' && stamp <= hour && hour-stamp < StatsHours:
			if hours[stamp] == nil {
				hours[stamp] = &StatsSlot{Hour: true, Start: time.Unix(stamp*3600, 0)}
			}
			hours[stamp].merge(st)
		}
	}
	for _, m := range minutes {
		out = append(out, *m)
	}
	for _, h := range hours {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Hour != out[j].Hour {
			return !out[i].Hour
		}
		return out[i].Start.Before(out[j].Start)
	})
	return out
}

// statsFieldNames appends to names the fields of the values named in
// each slot (and the stamp of each slot but "c").
func statsFieldNames(names, slots, values []string) []string {
	for _, slot := range slots {
		if slot != "c" {
			names = append(names, slot)
		}
		for _, n := range values {
			names = append(names, slot+":"+n)
		}
	}
	return names
}

// hmgetInto puts the values an HMGET of names answered into fields.
func hmgetInto(fields map[string]string, names []string, got rueidis.RedisResult) error {
	vals, err := got.ToArray()
	if err == nil && len(vals) != len(names) {
		err = fmt.Errorf("HMGET answered %d values for %d fields", len(vals), len(names))
	}
	for i := 0; err == nil && i < len(vals); i++ {
		if v, verr := vals[i].ToString(); verr == nil {
			fields[names[i]] = v
		}
	}
	return err
}

// statsKindsListed are the kinds a stats hash's field "kinds" lists.
func statsKindsListed(rec string) []string {
	var kinds []string
	for _, f := range strings.Fields(rec) {
		if kind, _, ok := strings.Cut(f, "="); ok && kind != "" {
			kinds = append(kinds, kind)
		}
	}
	return kinds
}

// add counts n under a value name.
func (st *StatsSlot) add(name string, n int64) {
	switch {
	case len(name) > 2 && name[1] == '/':
		i := strings.IndexByte(kindLetters, name[0])
		if i < 0 {
			return
		}
		if st.Kinds == nil {
			st.Kinds = make(map[string][3]int64)
		}
		c := st.Kinds[name[2:]]
		c[i] += n
		st.Kinds[name[2:]] = c
	case len(name) == 1:
		if c := strings.IndexByte(StatCounters, name[0]); c >= 0 {
			st.Counts[c] += n
		}
	case name == "ws":
		st.WaitSum += n
	case name == "us":
		st.RunSum += n
	case name[0] == 'w' || name[0] == 'u':
		b, err := strconv.Atoi(name[1:])
		if err != nil || b < 0 || b >= HistogramBuckets {
			return
		}
		if name[0] == 'w' {
			st.Wait[b] += n
		} else {
			st.Run[b] += n
		}
	}
}

// merge adds o's values to st.
func (st *StatsSlot) merge(o *StatsSlot) {
	for i := range st.Counts {
		st.Counts[i] += o.Counts[i]
	}
	for i := range st.Wait {
		st.Wait[i] += o.Wait[i]
		st.Run[i] += o.Run[i]
	}
	st.WaitSum += o.WaitSum
	st.RunSum += o.RunSum
	for kind, oc := range o.Kinds {
		if st.Kinds == nil {
			st.Kinds = make(map[string][3]int64)
		}
		c := st.Kinds[kind]
		for i := range c {
			c[i] += oc[i]
		}
		st.Kinds[kind] = c
	}
}
