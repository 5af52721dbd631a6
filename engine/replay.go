package engine

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// Replay resets operator op so that its next Run rebuilds its state from
// the log: its state is cleared and each of its source partitions is read
// again from the offset from returns for it. Forwarded records of a
// repartition topic are re-read from the start of that topic and applied
// only if their source offset is at or after the source partition's new
// start. Replay must be called before Run, on a stopped node.
func (e *Engine) Replay(ctx context.Context, op string, from func(tp eventlog.TopicPartition) (int64, error)) error {
	if e.started.Load() {
		return fmt.Errorf("engine: replay while running")
	}
	if e.stages == nil {
		if err := e.build(ctx); err != nil {
			return err
		}
	}
	var st *stage
	for _, s := range e.stages {
		if s.name == op {
			st = s
		}
	}
	if st == nil {
		return fmt.Errorf("engine: no operator %q", op)
	}
	var buf [8]byte
	starts := map[eventlog.TopicPartition]int64{}
	startOf := func(tp eventlog.TopicPartition) (int64, error) {
		if o, ok := starts[tp]; ok {
			return o, nil
		}
		o, err := from(tp)
		if err != nil {
			return 0, fmt.Errorf("replay start of %s: %w", tp, err)
		}
		starts[tp] = o
		return o, nil
	}
	for p := int32(0); p < st.partitions; p++ {
		ns := e.db.Namespace(namespaceName(st.name, p))
		if err := ns.Clear(); err != nil {
			return fmt.Errorf("clear state of %s/%d: %w", st.name, p, err)
		}
		b := ns.NewBatch()
		for _, in := range st.inputs[p] {
			var off int64
			switch in.mode {
			case modeForwarded:
				o, err := e.log.Offsets(ctx, in.tp)
				if err != nil {
					b.Discard()
					return err
				}
				off = o.Start
				// Forwarded records carry their source position; skip those
				// from before each source partition's replay start.
				src := e.sourceTopicOf(op, in.tp.Topic)
				n, err := e.log.Partitions(ctx, src)
				if err != nil {
					b.Discard()
					return err
				}
				for sp := int32(0); sp < n; sp++ {
					so, err := startOf(eventlog.TopicPartition{Topic: src, Partition: sp})
					if err != nil {
						b.Discard()
						return err
					}
					binary.BigEndian.PutUint64(buf[:], uint64(so-1))
					if err := b.Set(sourceKey(sp), buf[:]); err != nil {
						b.Discard()
						return err
					}
				}
			default:
				o, err := startOf(in.tp)
				if err != nil {
					b.Discard()
					return err
				}
				off = o
			}
			binary.BigEndian.PutUint64(buf[:], uint64(off))
			if err := b.Set(offsetKey(in.tp), buf[:]); err != nil {
				b.Discard()
				return err
			}
		}
		if err := b.Commit(); err != nil {
			return fmt.Errorf("reset offsets of %s/%d: %w", st.name, p, err)
		}
	}
	return nil
}

// sourceTopicOf returns the input topic whose repartition topic is rt.
func (e *Engine) sourceTopicOf(op, rt string) string {
	for _, o := range e.ops {
		s := o.Spec()
		if s.Name != op {
			continue
		}
		for _, in := range s.Inputs {
			if in.Route != nil && RepartitionTopic(op, in.Topic) == rt {
				return in.Topic
			}
		}
	}
	return ""
}
