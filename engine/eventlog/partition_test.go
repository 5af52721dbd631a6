package eventlog

import "testing"

// Vectors from Kafka's own test suite (clients UtilsTest.testMurmur2) and
// from DefaultPartitionerTest, so the engine places keys exactly where the
// Java client would.
func TestMurmur2MatchesKafkaJavaClient(t *testing.T) {
	cases := []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := Murmur2([]byte(c.in)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPartitionForIsPositiveModulo(t *testing.T) {
	// murmur2("21") is negative; Kafka masks the sign bit before the modulo.
	const parts = 8
	h := int32(-973932308)
	want := int32((uint32(h) & 0x7fffffff) % parts)
	if got := PartitionFor([]byte("21"), parts); got != want {
		t.Fatalf("PartitionFor = %d, want %d", got, want)
	}
	for _, k := range []string{"a", "b", "article-1", "x"} {
		p := PartitionFor([]byte(k), parts)
		if p < 0 || p >= parts {
			t.Fatalf("PartitionFor(%q) = %d out of range", k, p)
		}
	}
}
