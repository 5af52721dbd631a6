//go:build !unix

package query

import "errors"

// diskSpace is not known on this system: the node's disk gauges say it.
func diskSpace(string) (free, size uint64, err error) { return 0, 0, errors.ErrUnsupported }
