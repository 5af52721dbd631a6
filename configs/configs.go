// Package configs holds the default configuration, topic rules and source
// list, and compiles the topic rules into the binary so that a node runs
// the default rules from any working directory.
package configs

import _ "embed"

// TopicRules is topics.yaml, the default keyword rules for topic labels.
//
//go:embed topics.yaml
var TopicRules []byte
