package node

import (
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

var (
	membersDesc = prometheus.NewDesc("newsflow_cluster_members",
		"Cluster members by state (up, down) as this node's copy of the cluster state has them; a single node counts itself up.", []string{"state"}, nil)
	leaderDesc = prometheus.NewDesc("newsflow_cluster_leader",
		"1 on the node that leads the control plane (a single node leads itself).", nil, nil)
	unownedDesc = prometheus.NewDesc("newsflow_partitions_unowned",
		"Engine partitions whose owner is not up, or that have none, in this node's copy of the cluster state.", nil, nil)
	raftRefusedDesc = prometheus.NewDesc("newsflow_cluster_raft_connections_refused_total",
		"Inbound Raft connections this node refused since it started: no certificate of the cluster's CA, not TLS, a handshake too slow, or too many handshakes at once.", nil, nil)
	diskFreeDesc = prometheus.NewDesc("newsflow_disk_free_bytes",
		"Bytes available to newsflow on the file system of a directory it writes.", []string{"dir"}, nil)
	diskSizeDesc = prometheus.NewDesc("newsflow_disk_size_bytes",
		"Size of the file system of a directory newsflow writes.", []string{"dir"}, nil)
	pebbleMemDesc = prometheus.NewDesc("newsflow_pebble_memory_bytes",
		"Memory a Pebble database of the node holds outside the Go heap (db: state, log; part: memtables, zombie_memtables (flushed, still read by an iterator), block_cache).", []string{"db", "part"}, nil)
	memLimitDesc = prometheus.NewDesc("newsflow_memory_limit_bytes",
		"The node's memory limit (memory_limit; 0: none) and the Go runtime's share of it (part: node, go).", []string{"part"}, nil)
)

// nodeCollector reports the node's cluster view and disk at each scrape.
type nodeCollector struct{ n *Node }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{membersDesc, leaderDesc, unownedDesc, raftRefusedDesc, diskFreeDesc, diskSizeDesc, pebbleMemDesc, memLimitDesc} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	up, down, leader, unowned := 1, 0, 1, 0
	if cl := c.n.cluster; cl != nil {
		ch <- prometheus.MustNewConstMetric(raftRefusedDesc, prometheus.CounterValue, float64(cl.RefusedConnections()))
		st, _ := cl.State()
		up, down, leader = 0, 0, 0
		for _, m := range st.Members {
			if m.Up {
				up++
			} else {
				down++
			}
		}
		if cl.IsLeader() {
			leader = 1
		}
		for _, o := range st.Owners {
			if m, ok := st.Members[o.Node]; !ok || !m.Up {
				unowned++
			}
		}
		if len(st.Owners) < int(st.Partitions) {
			unowned += int(st.Partitions) - len(st.Owners)
		}
	}
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(up), "up")
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(down), "down")
	ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, float64(leader))
	ch <- prometheus.MustNewConstMetric(unownedDesc, prometheus.GaugeValue, float64(unowned))
	free, size, err := DiskSpace(c.n.cfg.DataDir)
	if err == nil {
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(free), "data")
		ch <- prometheus.MustNewConstMetric(diskSizeDesc, prometheus.GaugeValue, float64(size), "data")
	}
	pebbleMemory := func(db string, m state.Memory) {
		ch <- prometheus.MustNewConstMetric(pebbleMemDesc, prometheus.GaugeValue, float64(m.MemTables), db, "memtables")
		ch <- prometheus.MustNewConstMetric(pebbleMemDesc, prometheus.GaugeValue, float64(m.ZombieMemTables), db, "zombie_memtables")
		ch <- prometheus.MustNewConstMetric(pebbleMemDesc, prometheus.GaugeValue, float64(m.BlockCache), db, "block_cache")
	}
	pebbleMemory("state", c.n.db.Memory())
	if l, ok := c.n.log.(interface{ Memory() state.Memory }); ok {
		pebbleMemory("log", l.Memory())
	}
	plan := c.n.cfg.MemoryPlan()
	ch <- prometheus.MustNewConstMetric(memLimitDesc, prometheus.GaugeValue, float64(plan.Limit), "node")
	ch <- prometheus.MustNewConstMetric(memLimitDesc, prometheus.GaugeValue, float64(plan.GoLimit), "go")
}

// DiskSpace returns the bytes available to an unprivileged writer and the
// size of the file system holding dir.
func DiskSpace(dir string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	return st.Bavail * bs, st.Blocks * bs, nil
}
