package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configures a Kafka-backed log. The zero value of every field
// means its default; Brokers has no default and must be set.
type Options struct {
	// Brokers are the seed brokers, as host:port. Required.
	Brokers []string

	// ClientID is the client id sent to the brokers. Default "newsflow".
	ClientID string

	// ReplicationFactor is used when creating topics. Default -1, the
	// broker's default.replication.factor.
	ReplicationFactor int16

	// MaxMessageBytes bounds the encoded size of a record batch, and so of
	// one record. It sets the producer's batch limit and the
	// max.message.bytes of the topics CreateTopic makes; topics created
	// elsewhere keep their own limit (Kafka's default is 1 MiB). Default
	// 8 MiB.
	MaxMessageBytes int32

	// Logger receives franz-go's warnings and errors. Nil logs nothing.
	Logger *slog.Logger

	// TLS and SASL secure the connections to the brokers (default:
	// plaintext, no authentication). Open reads the TLS files.
	TLS  TLSOptions
	SASL SASLOptions

	// ClientOpts are extra franz-go options appended after the ones Open
	// sets, and applied to every client the log makes (the producer/admin
	// client and each reader's consumer). Meant for tests and tuning.
	ClientOpts []kgo.Opt

	// security are the client options of TLS and SASL, made by Open.
	security []kgo.Opt
}

// DefaultOptions returns the defaults. Brokers must still be set.
func DefaultOptions() Options {
	return Options{
		ClientID:          "newsflow",
		ReplicationFactor: -1,
		MaxMessageBytes:   8 << 20,
	}
}

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions())
	return o
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	o = o.withDefaults()
	if len(o.Brokers) == 0 {
		return errors.New("no brokers")
	}
	for _, b := range o.Brokers {
		if b == "" {
			return errors.New("empty broker address")
		}
	}
	if o.ReplicationFactor < -1 {
		return fmt.Errorf("replication factor %d: must be -1 or positive", o.ReplicationFactor)
	}
	if o.MaxMessageBytes < 1<<10 || o.MaxMessageBytes > 1<<30 {
		return fmt.Errorf("max message bytes %d: must be in [1KiB, 1GiB]", o.MaxMessageBytes)
	}
	if err := o.TLS.Validate(); err != nil {
		return err
	}
	return o.SASL.Validate()
}

// clientOpts returns the franz-go options shared by every client (TLS and
// SASL included), followed by extra and then o.ClientOpts.
func (o Options) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(o.ClientID),
	}
	opts = append(opts, o.security...)
	if o.Logger != nil {
		opts = append(opts, kgo.WithLogger(slogLogger{o.Logger}))
	}
	opts = append(opts, extra...)
	return append(opts, o.ClientOpts...)
}

// slogLogger bridges franz-go's logger to slog. Only warnings and errors
// are passed on: franz-go's info and debug levels log every request.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Level() kgo.LogLevel {
	if s.l.Enabled(context.Background(), slog.LevelWarn) {
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	sl := slog.LevelWarn
	if level == kgo.LogLevelError {
		sl = slog.LevelError
	}
	s.l.Log(context.Background(), sl, "kafka: "+msg, keyvals...)
}
