package eventlog

// Murmur2 is the 32-bit murmur2 hash exactly as Kafka's Java client computes
// it (org.apache.kafka.common.utils.Utils.murmur2, seed 0x9747b28c).
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	i := 0
	for ; n-i >= 4; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// PartitionFor returns the partition Kafka's default partitioner picks for
// a non-empty key: toPositive(murmur2(key)) % partitions. It panics if
// partitions <= 0.
func PartitionFor(key []byte, partitions int32) int32 {
	return int32((uint32(Murmur2(key)) & 0x7fffffff) % uint32(partitions))
}
