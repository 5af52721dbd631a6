package sketch

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// page holds PageSize consecutive counters of one row of one bucket's
// sketch, as Flush writes them and Load reads them: the counters of
// blocksPerPage blocks.
type page struct {
	c  [PageSize]uint32
	nz [PageSize / 64]uint64 // bit j: c[j] is not zero
}

// nonzero returns the number of counters of p that are not zero.
func (p *page) nonzero() int {
	n := 0
	for _, w := range p.nz {
		n += bits.OnesCount64(w)
	}
	return n
}

// mark sets p.nz from the counters.
func (p *page) mark() {
	p.nz = [PageSize / 64]uint64{}
	for j, v := range p.c {
		if v != 0 {
			p.nz[j/64] |= 1 << (j % 64)
		}
	}
}

// Page encodings: the first byte of a stored page.
const (
	pageDense  = 0 // PageSize uvarints
	pageSparse = 1 // (uvarint zeros skipped, uvarint nonzero count) pairs
)

// maxGapLen is the longest encoding of a gap in a sparse page:
// uvarintLen(PageSize - 1).
const maxGapLen = 2

// appendPage appends the encoding of pg to buf: dense or sparse, whichever
// is shorter (dense on a tie).
func appendPage(buf []byte, pg *page) []byte {
	p := &pg.c
	// A page with few nonzero counters, as most of a sparse bucket's are,
	// is shorter sparse whatever its values: each costs at most maxGapLen
	// bytes more sparse than dense, and each zero one byte dense and none
	// sparse. (Counts.appendPage makes the same choice.)
	if pg.nonzero()*(1+maxGapLen) < PageSize {
		return appendSparse(buf, pg)
	}
	dense, sparse, gap := 0, 0, 0
	for _, v := range p {
		n := uvarintLen(uint64(v))
		dense += n
		if v == 0 {
			gap++
			continue
		}
		sparse += uvarintLen(uint64(gap)) + n
		gap = 0
	}
	if dense <= sparse {
		buf = append(buf, pageDense)
		for _, v := range p {
			buf = binary.AppendUvarint(buf, uint64(v))
		}
		return buf
	}
	return appendSparse(buf, pg)
}

func appendSparse(buf []byte, p *page) []byte {
	buf = append(buf, pageSparse)
	next := 0 // after the last counter written
	for wi, word := range p.nz {
		for ; word != 0; word &= word - 1 {
			j := wi*64 + bits.TrailingZeros64(word)
			buf = binary.AppendUvarint(buf, uint64(j-next))
			buf = binary.AppendUvarint(buf, uint64(p.c[j]))
			next = j + 1
		}
	}
	return buf
}

var errBadPage = errors.New("malformed page")

// decodePage decodes b, as written by appendPage, into p (which it
// overwrites). It returns the number of nonzero counters.
func decodePage(b []byte, p *[PageSize]uint32) (int, error) {
	*p = [PageSize]uint32{}
	if len(b) == 0 {
		return 0, errBadPage
	}
	format, b := b[0], b[1:]
	nz := 0
	switch format {
	case pageDense:
		for i := range p {
			v, n := binary.Uvarint(b)
			if n <= 0 || v > 1<<32-1 {
				return 0, errBadPage
			}
			p[i] = uint32(v)
			if v != 0 {
				nz++
			}
			b = b[n:]
		}
	case pageSparse:
		i := 0
		for len(b) > 0 {
			gap, n := binary.Uvarint(b)
			if n <= 0 || gap >= uint64(PageSize-i) {
				return 0, errBadPage
			}
			b = b[n:]
			i += int(gap)
			v, n := binary.Uvarint(b)
			if n <= 0 || v == 0 || v > 1<<32-1 {
				return 0, errBadPage
			}
			b = b[n:]
			p[i] = uint32(v)
			i++
			nz++
		}
	default:
		return 0, errBadPage
	}
	if len(b) != 0 {
		return 0, errBadPage
	}
	return nz, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
