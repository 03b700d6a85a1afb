package engine

import (
	"errors"
	"sync"

	"github.com/worqr/worqr/internal/errs"
)

// Books are a session's books of its in-flight processes: the one map of
// them (a process's way in, Adopt and AdoptAll, its end, End, and its way
// out, Drop and Forget, are this file's), the passes still to look for
// processes Redis says the worker holds and it does not know of, and how
// far it gave such processes back. Their state is theirs alone, guarded
// by their mu, under which only proc.State.mu is taken (InterruptAll). A
// decision over the books and the session's lease at once is the Lease's,
// which takes its mu before theirs (session.go).
type Books struct {
	mu sync.Mutex
	// procs are the worker's in-flight processes in the queue, by
	// process id. Guarded by mu.
	procs map[string]*Proc
	// unsure counts the renewals that will still look for processes
	// Redis says the worker holds but it does not know of. A dequeue
	// whose reply was lost sets it; it stays set for more than one pass
	// because the lost command may still run late on another pooled
	// connection. Guarded by mu.
	unsure int
	// releasedUpTo is the queue's last process id (as a number) when the
	// worker last gave back processes Redis said it held that it did not
	// know of (a reconciliation, a rejoin): a hand-off event for one of
	// them that comes later is ignored (see start.go).
	// Guarded by mu.
	releasedUpTo uint64
}

// BooksView is a copy of the books' state, for inspection.
type BooksView struct {
	Procs        int
	Unsure       int
	ReleasedUpTo uint64
}

// View is a copy of the books' state.
func (b *Books) View() BooksView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BooksView{Procs: len(b.procs), Unsure: b.unsure, ReleasedUpTo: b.releasedUpTo}
}

// Processes is a copy of the in-flight processes. Callers may hold the
// worker's mu.
func (b *Books) Processes() []*Proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.list()
}

// list is the processes held. Callers hold mu.
func (b *Books) list() []*Proc {
	ps := make([]*Proc, 0, len(b.procs))
	for _, p := range b.procs {
		ps = append(ps, p)
	}
	return ps
}

// TakeAll empties the books and returns what they held, with no
// reconciliation left to run (whoever takes them gives back everything
// under the worker's id). Callers may hold the worker's mu.
func (b *Books) TakeAll() []*Proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	lost := b.list()
	b.procs = make(map[string]*Proc)
	b.unsure = 0
	return lost
}

// EndAll ends every process the books hold, once the session has ended
// (the worker no longer serves the queue).
func (b *Books) EndAll(reason error) {
	b.mu.Lock()
	procs := b.procs
	b.procs = make(map[string]*Proc)
	b.mu.Unlock()
	for _, p := range procs {
		p.End(reason, true)
	}
}

// EndMatching ends (without settling: Finish still works) the processes
// of the queue that match.
func (b *Books) EndMatching(match func(*Proc) bool, reason error) {
	b.mu.Lock()
	var hit []*Proc
	for _, p := range b.procs {
		if match(p) {
			hit = append(hit, p)
		}
	}
	b.mu.Unlock()
	for _, p := range hit {
		p.End(reason, false)
	}
}

// A process's way into the books and out of them.

// AdoptAll records the processes a dequeue took, unless the session was
// fenced while the script ran (they are the peers' then), and reports
// whether it did.
func (s *Session) AdoptAll(ps []*Proc) bool { return s.Lease.adoptAll(&s.Books, ps) }

// Adopt records p, a process an enqueue handed the worker, unless the
// session is fenced, gave p's task back already (a reconciliation or a
// rejoin released it), or holds p already; it reports whether it did.
func (s *Session) Adopt(p *Proc) bool { return s.Lease.adopt(&s.Books, p) }

// adoptAll records ps in b unless the session is fenced, and reports
// whether it did: the lease's decision, under its mu, before the books'.
func (l *Lease) adoptAll(b *Books, ps []*Proc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state.IsFenced() {
		return false
	}
	b.addAll(ps)
	return true
}

// adopt records p in b unless the session is fenced or b refuses it, and
// reports whether it did: the lease's decision, under its mu, before the
// books'.
func (l *Lease) adopt(b *Books, p *Proc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.state.IsFenced() && b.add(p)
}

// addAll records ps.
func (b *Books) addAll(ps []*Proc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range ps {
		p.books = b
		b.procs[p.ID] = p
	}
}

// add records p, unless its task was given back already (its id is at
// most releasedUpTo) or p is held already, and reports whether it did.
func (b *Books) add(p *Proc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.Seq <= b.releasedUpTo || b.procs[p.ID] != nil {
		return false
	}
	p.books = b
	b.procs[p.ID] = p
	return true
}

// A process's end, whoever ends it: its handler's outcome written (the
// settler, settle.go), a cancel or delete event, a fence, a
// reconciliation, the session's end (EndAll). Each ends it here, and the
// first reason wins; one that is done with leaves the books it was
// adopted into (Forget).

// End closes Done with a reason; the first reason wins. It reports
// whether this call ended the process. A process lost (settled,
// ErrProcessLost) is reported to the observer as lost.
func (p *Proc) End(reason error, settled bool) bool {
	// A process ended by a cancel or delete event (not settled: Finish
	// still works) that is lost later is reported then.
	first, newlySettled := p.St.End(reason, settled)
	if newlySettled && errors.Is(reason, errs.ErrProcessLost) {
		p.observeEnd(Lost, "", reason)
	}
	return first
}

// Forget drops the process from the books that adopted it, if any, and
// ends it.
func (p *Proc) Forget(reason error) {
	if p.books != nil {
		p.books.Drop(p)
	}
	p.End(reason, true)
}

// observeEnd tells the observer, once, how the process ended (and, for
// Dead, the dead letter's reason).
func (p *Proc) observeEnd(outcome Outcome, reason string, err error) {
	if p.St.Observe() {
		p.Host.Observe(outcome, reason, err)
	}
}

// Drop takes p out of the books, if it is there. A process ending (its
// outcome written, or lost) leaves the books it was adopted into this
// way (Proc.Forget), whether or not its session still serves the queue.
func (b *Books) Drop(p *Proc) {
	b.mu.Lock()
	if b.procs[p.ID] == p {
		delete(b.procs, p.ID)
	}
	b.mu.Unlock()
}

// MarkUnsure makes the next passes renewals look for processes Redis
// says the worker holds that it does not know of: at least, or (exactly)
// reset to passes.
func (b *Books) MarkUnsure(passes int, atLeast bool) {
	b.mu.Lock()
	if atLeast {
		b.unsure = max(b.unsure, passes)
	} else {
		b.unsure = passes
	}
	b.mu.Unlock()
}

// IsUnsure reports whether the books have processes to look for.
func (b *Books) IsUnsure() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unsure > 0
}

// Reconciled records a reconciliation that gave back the processes up to
// the queue's process id upTo: one pass fewer to look, and hand-off
// events for those given back are ignored.
func (b *Books) Reconciled(upTo uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unsure--
	b.releasedUpTo = max(b.releasedUpTo, upTo)
}

// InterruptAll ends the handler contexts of every process held with
// cause (proc.State.mu is taken under mu), and, when giveUp, gives up
// their outcome writes being tried again (a closing worker's tasks go
// back with it; see proc.Persist).
func (b *Books) InterruptAll(cause error, giveUp bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.procs {
		p.St.Interrupt(cause)
		if giveUp {
			p.St.GiveUp()
		}
	}
}

// The books' side of the decisions the Lease makes over them, under its
// mu (session.go).

// has reports whether the books hold p.
func (b *Books) has(p *Proc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.procs[p.ID] == p
}

// ids lists the ids of the processes held.
func (b *Books) ids() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := make([]string, 0, len(b.procs))
	for pid := range b.procs {
		keep = append(keep, pid)
	}
	return keep
}

// released records that the worker gave back every process it held up
// to the queue's process id upTo: hand-off events for those are ignored.
func (b *Books) released(upTo uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releasedUpTo = max(b.releasedUpTo, upTo)
}
