package webhook

import (
	"slices"
	"time"
)

// sched orders the pending deliveries of the outbox by the time of their
// next attempt, hook by hook. It holds no goroutine and no timer: the
// dispatcher's loop asks it what is due (next), tells it what became of
// an attempt (done), and sleeps until wake. A hook has at most one
// attempt in flight, an owner at most perOwner, so a receiver that never
// answers holds one worker per hook for one attempt timeout at most, and
// one user's hooks never hold every worker; a retry waits in the queue,
// not in a worker.
//
// Not safe for concurrent use: the dispatcher's loop owns it.
type sched struct {
	perOwner int
	hooks    map[string]*hookQueue
	owners   map[string]int     // attempts in flight by owner
	known    map[string]bool    // delivery ids queued or in flight
	inflight map[string]pending // by delivery id
}

// hookQueue is one hook's pending deliveries, by next attempt time then
// id.
type hookQueue struct {
	owner string
	items []pending
	busy  bool // an attempt of this hook is in flight
}

func newSched(perOwner int) *sched {
	s := &sched{perOwner: max(1, perOwner), inflight: map[string]pending{}, owners: map[string]int{}}
	s.reset()
	return s
}

// reset forgets every queued delivery (the node is no longer the
// writer; the outbox keeps them); attempts in flight stay accounted
// until done.
func (s *sched) reset() {
	s.hooks, s.known = map[string]*hookQueue{}, map[string]bool{}
	for id, p := range s.inflight {
		s.known[id] = true
		s.queue(p.Hook, p.Owner).busy = true
	}
}

func (s *sched) queue(hook, owner string) *hookQueue {
	q := s.hooks[hook]
	if q == nil {
		q = &hookQueue{owner: owner}
		s.hooks[hook] = q
	}
	return q
}

// add queues p unless its delivery is queued or in flight already, and
// reports whether it did.
func (s *sched) add(p pending) bool {
	if s.known[p.ID] {
		return false
	}
	s.known[p.ID] = true
	q := s.queue(p.Hook, p.Owner)
	i, _ := slices.BinarySearchFunc(q.items, p, comparePending)
	q.items = slices.Insert(q.items, i, p)
	return true
}

func comparePending(a, b pending) int {
	if a.NextAt != b.NextAt {
		if a.NextAt < b.NextAt {
			return -1
		}
		return 1
	}
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// len is how many deliveries are queued or in flight.
func (s *sched) len() int { return len(s.known) }

// eligible reports whether q may start an attempt now.
func (s *sched) eligible(q *hookQueue) bool {
	return !q.busy && len(q.items) > 0 && s.owners[q.owner] < s.perOwner
}

// next takes the delivery due at now that waited longest, among the
// hooks with no attempt in flight whose owner is under its bound, and
// marks it in flight. Ties go to the owner with fewer attempts in flight,
// then to the hook id, so owners take turns.
func (s *sched) next(now time.Time) (pending, bool) {
	ms := now.UnixMilli()
	var best *hookQueue
	var bestID string
	for id, q := range s.hooks {
		if !s.eligible(q) || q.items[0].NextAt > ms {
			continue
		}
		if best == nil || s.before(q, id, best, bestID) {
			best, bestID = q, id
		}
	}
	if best == nil {
		return pending{}, false
	}
	p := best.items[0]
	best.items = slices.Delete(best.items, 0, 1)
	best.busy = true
	s.owners[best.owner]++
	s.inflight[p.ID] = p
	return p, true
}

func (s *sched) before(q *hookQueue, id string, best *hookQueue, bestID string) bool {
	a, b := q.items[0].NextAt, best.items[0].NextAt
	if a != b {
		return a < b
	}
	if oa, ob := s.owners[q.owner], s.owners[best.owner]; oa != ob {
		return oa < ob
	}
	return id < bestID
}

// done ends the attempt of p in flight: again queues it for its next
// attempt at p.NextAt; otherwise it leaves the schedule (delivered,
// dead-lettered or dropped). gone drops every queued delivery of p's
// hook too (the hook was deleted).
func (s *sched) done(p pending, again, gone bool) {
	if _, ok := s.inflight[p.ID]; !ok {
		return
	}
	delete(s.inflight, p.ID)
	if s.owners[p.Owner]--; s.owners[p.Owner] <= 0 {
		delete(s.owners, p.Owner)
	}
	delete(s.known, p.ID)
	q := s.queue(p.Hook, p.Owner)
	q.busy = false
	switch {
	case gone:
		for _, o := range q.items {
			delete(s.known, o.ID)
		}
		delete(s.hooks, p.Hook)
		return
	case again:
		s.add(p)
	}
	if len(q.items) == 0 && !q.busy {
		delete(s.hooks, p.Hook)
	}
}

// wake returns when the next attempt falls due, among the hooks that may
// start one; false when none may (nothing queued, or every hook waits for
// an attempt in flight).
func (s *sched) wake() (time.Time, bool) {
	var at int64
	ok := false
	for _, q := range s.hooks {
		if s.eligible(q) && (!ok || q.items[0].NextAt < at) {
			at, ok = q.items[0].NextAt, true
		}
	}
	return time.UnixMilli(at), ok
}

// retryDelay is the wait after the tries-th failed try: backoff, doubled
// after each further failure, at most maxBackoff.
func retryDelay(backoff, maxBackoff time.Duration, tries int) time.Duration {
	d := backoff
	for i := 1; i < tries && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}
