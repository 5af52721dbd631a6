package sketch

import (
	"math"
	"math/bits"
)

// table maps article hashes to values: open addressing with linear
// probing. The keys are xxHash64 values, uniform already, so a key's home
// slot is found with a multiplication rather than by hashing it again (the
// index maps of the candidate sets and the kept ids are looked up on every
// Add). It holds at most half of its slots, so that probes and the shifts
// of a removal stay short. The zero value is empty.
type table[V any] struct {
	slots []tableSlot[V]
	n     int
}

type tableSlot[V any] struct {
	key  uint64
	used bool
	val  V
}

// home returns the first slot probed for key h in a table of n slots. The
// multiplication by an odd constant first scatters keys that come in
// order (Load reads the ids in hash order): otherwise they would pile up
// in the first slots of a table still growing.
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h*0x9e3779b97f4a7c15, uint64(n))
	return int(hi)
}

func (t *table[V]) len() int { return t.n }

// find returns the slot of key h, or -1.
func (t *table[V]) find(h uint64) int {
	n := len(t.slots)
	if n == 0 {
		return -1
	}
	for i := home(h, n); ; {
		s := &t.slots[i]
		if !s.used {
			return -1
		}
		if s.key == h {
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// get returns the value of key h.
func (t *table[V]) get(h uint64) (V, bool) {
	if i := t.find(h); i >= 0 {
		return t.slots[i].val, true
	}
	var zero V
	return zero, false
}

// ref returns the value of key h to update in place, or nil.
func (t *table[V]) ref(h uint64) *V {
	if i := t.find(h); i >= 0 {
		return &t.slots[i].val
	}
	return nil
}

// upsert returns the value of key h to update in place, adding the key
// with the zero value if t does not hold it (added), growing t (to at
// most limit keys' worth of slots) if needed.
func (t *table[V]) upsert(h uint64, limit int) (v *V, added bool) {
	n := len(t.slots)
	if n > 0 {
		for i := home(h, n); ; {
			s := &t.slots[i]
			if !s.used {
				if (t.n+1)*2 > n {
					break // grow first
				}
				*s = tableSlot[V]{key: h, used: true}
				t.n++
				return &s.val, true
			}
			if s.key == h {
				return &s.val, false
			}
			if i++; i == n {
				i = 0
			}
		}
	}
	var zero V
	t.put(h, zero, limit)
	return &t.slots[t.find(h)].val, true
}

// put sets the value of key h, growing t (to at most limit keys' worth
// of slots) if needed.
func (t *table[V]) put(h uint64, v V, limit int) {
	if (t.n+1)*2 > len(t.slots) {
		t.grow(limit)
	}
	n := len(t.slots)
	for i := home(h, n); ; {
		s := &t.slots[i]
		if !s.used {
			*s = tableSlot[V]{key: h, used: true, val: v}
			t.n++
			return
		}
		if s.key == h {
			s.val = v
			return
		}
		if i++; i == n {
			i = 0
		}
	}
}

// grow doubles the slots, to at most those that limit keys need.
func (t *table[V]) grow(limit int) {
	size := max(16, 2*len(t.slots))
	if most := 2 * limit; limit < math.MaxInt/4 && size > most {
		size = max(most, 2*(t.n+1))
	}
	old := t.slots
	t.slots, t.n = make([]tableSlot[V], size), 0
	for i := range old {
		if old[i].used {
			t.put(old[i].key, old[i].val, limit)
		}
	}
}

// del removes key h.
func (t *table[V]) del(h uint64) {
	if i := t.find(h); i >= 0 {
		t.delSlot(i)
	}
}

// delSlot removes the key in slot i (found with find), shifting back the
// keys probed past it.
func (t *table[V]) delSlot(i int) {
	n := len(t.slots)
	for {
		t.slots[i] = tableSlot[V]{}
		j := i
		for {
			if j++; j == n {
				j = 0
			}
			s := &t.slots[j]
			if !s.used {
				t.n--
				return
			}
			// The key in j stays unless its home is cyclically outside
			// (i, j]: then it moves to i.
			k := home(s.key, n)
			if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
				continue
			}
			t.slots[i] = *s
			i = j
			break
		}
	}
}

// clear removes every key, keeping the slots.
func (t *table[V]) clear() {
	clear(t.slots)
	t.n = 0
}

// all calls fn for each key and value, in slot order; fn must not change
// t.
func (t *table[V]) all(fn func(h uint64, v *V)) {
	for i := range t.slots {
		if s := &t.slots[i]; s.used {
			fn(s.key, &s.val)
		}
	}
}
