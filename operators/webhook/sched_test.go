package webhook

import (
	"testing"
	"time"
)

// TestRetryDelay: the wait after the n-th failed try doubles from the
// backoff and stops at the maximum.
func TestRetryDelay(t *testing.T) {
	for tries, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 40: time.Minute} {
		if got := retryDelay(time.Second, time.Minute, tries); got != want {
			t.Errorf("after %d failed tries: %v, want %v", tries, got, want)
		}
	}
	if got := retryDelay(3*time.Second, time.Second, 1); got != time.Second {
		t.Errorf("a backoff over the maximum: %v", got)
	}
}

func at(ms int64) time.Time { return time.UnixMilli(ms) }

// nextIDs takes every try due at now and returns their delivery ids in
// the order given.
func nextIDs(s *sched, now int64) []string {
	var ids []string
	for {
		p, ok := s.next(at(now))
		if !ok {
			return ids
		}
		ids = append(ids, p.ID)
	}
}

// TestSchedPerHook: a hook has one try in flight at most, its deliveries
// go in order of their next try; a retry waits for its time without
// holding back the other hooks; wake says when the next try is due.
func TestSchedPerHook(t *testing.T) {
	s := newSched(10)
	s.add(pending{ID: "a2", Hook: "A", Owner: "ann", NextAt: 100})
	s.add(pending{ID: "a1", Hook: "A", Owner: "ann", NextAt: 100})
	s.add(pending{ID: "b1", Hook: "B", Owner: "bob", NextAt: 150})
	if s.add(pending{ID: "a1", Hook: "A", Owner: "ann", NextAt: 100}) {
		t.Error("a delivery queued twice")
	}
	if w, ok := s.wake(); !ok || w.UnixMilli() != 100 {
		t.Errorf("wake %v %v, want 100", w.UnixMilli(), ok)
	}
	if got := nextIDs(s, 99); len(got) != 0 {
		t.Errorf("due before their time: %v", got)
	}
	if got := nextIDs(s, 200); len(got) != 2 || got[0] != "a1" || got[1] != "b1" {
		t.Fatalf("due at 200: %v, want a1 (one per hook) then b1", got)
	}
	if _, ok := s.wake(); ok {
		t.Error("a wake while every hook has a try in flight")
	}
	// a1 failed: its retry at 1,200 queues behind a2, which goes next.
	s.done(pending{ID: "a1", Hook: "A", Owner: "ann", NextAt: 1200, Tries: 1}, true, false)
	if got := nextIDs(s, 200); len(got) != 1 || got[0] != "a2" {
		t.Fatalf("after a1 failed: %v, want a2", got)
	}
	s.done(pending{ID: "b1", Hook: "B", Owner: "bob"}, false, false)
	s.add(pending{ID: "b2", Hook: "B", Owner: "bob", NextAt: 300})
	if got := nextIDs(s, 300); len(got) != 1 || got[0] != "b2" {
		t.Fatalf("bob's next delivery while ann's retry waits: %v", got)
	}
	s.done(pending{ID: "a2", Hook: "A", Owner: "ann"}, false, false)
	if w, ok := s.wake(); !ok || w.UnixMilli() != 1200 {
		t.Errorf("wake %v %v, want 1200 (a1's retry)", w.UnixMilli(), ok)
	}
	if got := nextIDs(s, 1199); len(got) != 0 {
		t.Errorf("a retry before its time: %v", got)
	}
	if got := nextIDs(s, 1200); len(got) != 1 || got[0] != "a1" {
		t.Errorf("at 1200: %v, want a1", got)
	}
	if s.len() != 2 {
		t.Errorf("len %d, want 2 in flight (a1, b2)", s.len())
	}
}

// TestSchedPerOwner: an owner's hooks hold at most perOwner tries at
// once; the others' deliveries take the remaining workers, owners taking
// turns on ties.
func TestSchedPerOwner(t *testing.T) {
	s := newSched(2)
	for _, h := range []string{"h0", "h1", "h2", "h3", "h4"} {
		s.add(pending{ID: "ann-" + h, Hook: h, Owner: "ann", NextAt: 100})
	}
	s.add(pending{ID: "bob-1", Hook: "z", Owner: "bob", NextAt: 100})
	got := nextIDs(s, 100)
	owners := map[string]int{}
	for _, id := range got {
		owners[id[:3]]++
	}
	if owners["ann"] != 2 || owners["bob"] != 1 {
		t.Fatalf("in flight %v, want 2 of ann's and bob's", got)
	}
	if got[1] != "bob-1" {
		t.Errorf("order %v: bob's delivery should come second (owners take turns)", got)
	}
	// One of ann's ends: the next of hers goes.
	s.done(pending{ID: got[0], Hook: "h0", Owner: "ann"}, false, false)
	if more := nextIDs(s, 100); len(more) != 1 || more[0][:3] != "ann" {
		t.Errorf("after one of ann's ended: %v", more)
	}
}

// TestSchedGoneAndReset: a deleted hook's queued deliveries go with it;
// reset forgets the queue but keeps counting the tries in flight, so a
// resumed outbox does not start a second try of one delivery.
func TestSchedGoneAndReset(t *testing.T) {
	s := newSched(4)
	s.add(pending{ID: "a1", Hook: "A", Owner: "ann", NextAt: 1})
	s.add(pending{ID: "a2", Hook: "A", Owner: "ann", NextAt: 2})
	s.add(pending{ID: "b1", Hook: "B", Owner: "bob", NextAt: 1})
	p, _ := s.next(at(10))
	if p.ID != "a1" {
		t.Fatalf("first %s", p.ID)
	}
	s.done(p, false, true)
	if got := nextIDs(s, 10); len(got) != 1 || got[0] != "b1" {
		t.Errorf("after A was deleted: %v, want b1 only", got)
	}
	s.reset()
	if s.add(pending{ID: "b1", Hook: "B", Owner: "bob", NextAt: 1}) {
		t.Error("a delivery in flight queued again after reset")
	}
	s.add(pending{ID: "b2", Hook: "B", Owner: "bob", NextAt: 1})
	if got := nextIDs(s, 10); len(got) != 0 {
		t.Errorf("a second try of hook B while one is in flight: %v", got)
	}
	s.done(pending{ID: "b1", Hook: "B", Owner: "bob"}, false, false)
	if got := nextIDs(s, 10); len(got) != 1 || got[0] != "b2" {
		t.Errorf("after b1 ended: %v", got)
	}
}
