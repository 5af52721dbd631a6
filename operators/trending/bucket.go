package trending

// Buckets: the open-addressing cell tables of one window bucket.

func hashIdx(p uint32, mask int) int {
	h := p * 0x9E3779B1
	return int(h^h>>15) & mask
}

// inc adds one to the count of key (a pair, maybe with categoryOnly) in
// open bucket s and marks it dirty. It reports whether the entry was clean
// before.
func (s *bucket) inc(p uint32) bool {
	if (s.n+1)*4 > len(s.tab)*3 {
		s.grow()
	}
	mask := len(s.tab) - 1
	for i := hashIdx(p, mask); ; i = (i + 1) & mask {
		e := s.tab[i]
		if e == 0 {
			s.tab[i] = uint64(p)<<32 | dirtyBit | 1
			s.n++
			return true
		}
		if uint32(e>>32) == p {
			s.tab[i] = (e + 1) | dirtyBit
			return e&dirtyBit == 0
		}
	}
}

// put stores entry e (its key in the high half) in open bucket s, which
// must not hold the key yet.
func (s *bucket) put(e uint64) {
	if (s.n+1)*4 > len(s.tab)*3 {
		s.grow()
	}
	mask := len(s.tab) - 1
	i := hashIdx(uint32(e>>32), mask)
	for s.tab[i] != 0 {
		i = (i + 1) & mask
	}
	s.tab[i] = e
	s.n++
}

// find returns the position of key p in open bucket s, which must hold it.
func (s *bucket) find(p uint32) int {
	mask := len(s.tab) - 1
	i := hashIdx(p, mask)
	for uint32(s.tab[i]>>32) != p || s.tab[i] == 0 {
		i = (i + 1) & mask
	}
	return i
}

func (s *bucket) grow() {
	old := s.tab
	s.tab = make([]uint64, max(16, 2*len(old)))
	s.n = 0
	for _, e := range old {
		if e != 0 {
			s.put(e)
		}
	}
}

// reopen turns a compacted bucket back into a hash table, keeping each
// entry's dirty bit, for an older share.
func (s *bucket) reopen() {
	old := s.tab
	size := 16
	for size*3 < len(old)*4+4 {
		size *= 2
	}
	s.tab = make([]uint64, size)
	s.n, s.open, s.closedDirty = 0, true, false
	s.dirty = s.dirty[:0]
	for _, e := range old {
		s.put(e)
		if e&dirtyBit != 0 {
			s.dirty = append(s.dirty, uint32(e>>32))
		}
	}
}

// close compacts an open bucket that can no longer be written.
func (s *bucket) close() {
	out := make([]uint64, 0, s.n)
	for _, e := range s.tab {
		if e != 0 {
			out = append(out, e)
		}
	}
	s.tab = out
	s.open = false
	s.closedDirty = len(s.dirty) > 0
	s.dirty = nil
}
