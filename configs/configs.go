// Package configs holds the default configuration, topic rules, source
// list and story model, and compiles the topic rules and the story model into the binary so that a node runs
// the default rules from any working directory.
package configs

import _ "embed"

// TopicRules is topics.yaml, the default keyword rules for topic labels.
//
//go:embed topics.yaml
var TopicRules []byte

// StoriesModel is stories-model.json, the learned story model shipped for
// the stories stage (stories.model: builtin), trained by
//
//	newsflow stories train --data ../shared/data/clustering/uci_dev.ndjson --merge-uci --spread 12h --seed 1 --out configs/stories-model.json
//
// on the UCI News Aggregator headlines (CC BY 4.0; the file holds weights
// only, no text of the data).
//
//go:embed stories-model.json
var StoriesModel []byte
