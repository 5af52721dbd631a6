//go:build !race

package neardup

// raceEnabled reports whether the race detector is on; measurements that
// only log numbers skip their slowest parts under it.
const raceEnabled = false
