package model

import (
	_ "embed"
	"sync"
)

// defaultFile is the model shipped as the default: trained by
//
//	newsflow stories train --data uci_dev.ndjson --merge-uci --spread 12h --seed 1 --out default.json
//
// on the UCI News Aggregator headlines of ../shared/data (CC BY 4.0; the
// file holds weights only, no text of the data).
//
//go:embed default.json
var defaultFile []byte

var defaultModel = sync.OnceValues(func() (*Model, error) { return Decode(defaultFile) })

// Default returns the shipped default model. Callers must not modify it.
func Default() (*Model, error) { return defaultModel() }
