package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/newsflow/newsflow/query"
)

// cmdStatus prints a node's view of its cluster: members, the leader and
// every partition with its owner, epoch, lag and state size. A node that
// is no cluster member gets singleStatus.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, asJSON, err := adminFlags("status", args, stderr)
	if err != nil {
		return err
	}
	b, err := c.call(ctx, http.MethodGet, "/api/v1/admin/cluster", "", nil)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
		return singleStatus(ctx, c, asJSON, stdout)
	}
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if asJSON {
		_, err := stdout.Write(b)
		return err
	}
	var v query.ClusterView
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	fmt.Fprintf(stdout, "node %s, leader %s\n\n", v.Node, v.Leader)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tHTTP\tSTATE\tPARTITIONS")
	for _, m := range v.Members {
		state := "up"
		switch {
		case m.Leaving:
			state = "leaving"
		case !m.Up:
			state = "down"
		}
		if m.Leader {
			state += ", leader"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", m.ID, m.HTTPAddr, state, m.Partitions)
	}
	w.Flush()
	fmt.Fprintln(stdout)
	w = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tOWNER\tEPOCH\tRUNNING\tLAG\tSTATE")
	for _, p := range v.Partitions {
		fmt.Fprintf(w, "%d\t%s\t%d\t%v\t%d\t%s\n", p.Partition, p.Owner, p.Epoch, p.Running, p.Lag, humanBytes(p.StateBytes))
	}
	w.Flush()
	if len(v.Unreachable) > 0 {
		fmt.Fprintf(stdout, "\nnot answering: %s\n", strings.Join(v.Unreachable, ", "))
	}
	return nil
}

// singleStatus prints the status of a node that runs alone: readiness,
// lag per stage and per partition, dead letters and store sizes.
func singleStatus(ctx context.Context, c *nodeClient, asJSON bool, stdout io.Writer) error {
	stats, err := c.call(ctx, http.MethodGet, "/api/v1/admin/stats", "", nil)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	progress, err := c.call(ctx, http.MethodGet, "/api/v1/admin/progress", "", nil)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"node": c.base, "cluster": false,
			"stats": json.RawMessage(stats), "progress": json.RawMessage(progress)})
	}
	var st struct {
		UptimeS     int64  `json:"uptime_s"`
		Ready       bool   `json:"ready"`
		DeadLetters int64  `json:"dead_letters"`
		DeadTopic   string `json:"dead_letter_topic"`
		Stages      []struct {
			Stage     string `json:"stage"`
			Committed int64  `json:"committed"`
			Lag       int64  `json:"lag"`
		} `json:"stages"`
		Stores map[string]uint64 `json:"stores"`
	}
	var pr struct {
		CaughtUp bool `json:"caught_up"`
		Inputs   []struct {
			Partition int32 `json:"partition"`
			Lag       int64 `json:"lag"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(stats, &st); err != nil {
		return fmt.Errorf("status: stats: %w", err)
	}
	if err := json.Unmarshal(progress, &pr); err != nil {
		return fmt.Errorf("status: progress: %w", err)
	}
	state := []string{"restoring state", "catching up"}
	if st.Ready {
		state[0] = "ready"
	}
	if pr.CaughtUp {
		state[1] = "caught up"
	}
	fmt.Fprintf(stdout, "node %s: a single node (not a cluster member), %s, up %s\n\n",
		c.base, strings.Join(state, ", "), time.Duration(st.UptimeS)*time.Second)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STAGE\tCOMMITTED\tLAG")
	for _, s := range st.Stages {
		fmt.Fprintf(w, "%s\t%d\t%d\n", s.Stage, s.Committed, s.Lag)
	}
	w.Flush()
	lags := map[int32]int64{}
	for _, in := range pr.Inputs {
		lags[in.Partition] += in.Lag
	}
	fmt.Fprintln(stdout)
	w = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tLAG")
	for _, p := range slices.Sorted(maps.Keys(lags)) {
		fmt.Fprintf(w, "%d\t%d\n", p, lags[p])
	}
	w.Flush()
	fmt.Fprintln(stdout)
	w = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STORE\tSIZE")
	for _, name := range slices.Sorted(maps.Keys(st.Stores)) {
		fmt.Fprintf(w, "%s\t%s\n", name, humanBytes(st.Stores[name]))
	}
	w.Flush()
	fmt.Fprintf(stdout, "\ndead letters: %d in %s\n", st.DeadLetters, st.DeadTopic)
	return nil
}

// cmdLeave asks a node to give up its partitions and leave its cluster;
// the node then stops.
func cmdLeave(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, _, err := adminFlags("leave", args, stderr)
	if err != nil {
		return err
	}
	b, err := c.call(ctx, http.MethodPost, "/api/v1/admin/cluster/leave", "", nil)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
		return errors.New("leave: the node is not a cluster member: there is nothing to leave (stop it with SIGTERM or Ctrl-C)")
	}
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
