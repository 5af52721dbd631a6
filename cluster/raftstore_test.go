package cluster

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestRaftStoreLogsAndStableValues is one scenario checked step by step (cyclomatic 32): the steps
// depend on each other's state, so they stay in order in one function.
func TestRaftStoreLogsAndStableValues(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenRaftStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 0 {
		t.Fatalf("empty store: first %d", first)
	}
	at := time.Unix(1700000000, 123)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		l := &raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand, Data: []byte{byte(i), 0, 'x'}, AppendedAt: at}
		if i == 7 {
			l.Extensions = []byte("ext")
			l.Data = nil
		}
		logs = append(logs, l)
	}
	if err := s.StoreLogs(logs[:9]); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(logs[9]); err != nil {
		t.Fatal(err)
	}
	check := func(s *RaftStore, first, last uint64) {
		t.Helper()
		f, err1 := s.FirstIndex()
		l, err2 := s.LastIndex()
		if err1 != nil || err2 != nil || f != first || l != last {
			t.Fatalf("first %d last %d (%v %v), want %d %d", f, l, err1, err2, first, last)
		}
		for i := first; i <= last; i++ {
			var got raft.Log
			if err := s.GetLog(i, &got); err != nil {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
			want := logs[i-1]
			if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
				!bytes.Equal(got.Extensions, want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
				t.Fatalf("log %d = %+v, want %+v", i, got, *want)
			}
		}
	}
	check(s, 1, 10)
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	check(s, 5, 10)
	var l raft.Log
	if err := s.GetLog(3, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("deleted entry: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Fatalf("missing key: %q %v", v, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Everything survives a reopen.
	s, err = OpenRaftStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, 5, 10)
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Fatalf("CurrentTerm = %d %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
		t.Fatalf("LastVoteCand = %q %v", v, err)
	}
	// A suffix truncation, as after a conflicting leader.
	if err := s.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	check(s, 5, 7)
}
