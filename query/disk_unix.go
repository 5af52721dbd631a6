//go:build unix

package query

import "syscall"

// diskSpace returns the bytes free (for an unprivileged user) and the size
// of the file system that holds dir.
func diskSpace(dir string) (free, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
