package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Format and Version name the model file's format. A change to the
// features, their order or how they are computed must increase Version, so
// that a model trained on other features is refused.
const (
	Format  = "newsflow-story-model"
	Version = 1
)

// StageStories is Model.Stage of a model for the stories stage.
const StageStories = "stories"

// ErrModel is wrapped by Decode's errors: the file is not a model this
// code can use.
var ErrModel = errors.New("story model")

// Model is a trained story model.
type Model struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Stage names the clusterer the model is for: empty for this
	// package's Clusterer, StageStories for the stories stage's
	// (operators/story), which computes its own features from its
	// centroids and checks their names itself. Of Params, a stage model
	// uses MinRank and DecayHours (0: its centroids do not decay); it
	// records MinShared and SmallStory as trained.
	Stage  string `json:"stage,omitempty"`
	Params Params `json:"params"`
	// Features names the ranker's inputs, and DecisionFeatures the
	// decision's, in the order of their weights.
	Features         []string `json:"features"`
	DecisionFeatures []string `json:"decision_features"`
	Ranker           Linear   `json:"ranker"`
	Decision         Linear   `json:"decision"`
	// Threshold is the decision's probability at or above which an
	// article joins its best candidate.
	Threshold float64 `json:"threshold"`
	// MergeCos is the cosine of two stories' centroids at or above which
	// an article that would join both merges them (0: never).
	MergeCos float64 `json:"merge_cos"`
	// Trained describes the training data.
	Trained TrainInfo `json:"trained"`
	// SHA256 is the hash of the file's content with this field empty.
	SHA256 string `json:"sha256"`
}

// TrainInfo describes what a model was trained on.
type TrainInfo struct {
	Articles int `json:"articles"`
	Stories  int `json:"stories"`
	// Data is the SHA-256 of the training file, when trained from one.
	Data string `json:"data,omitempty"`
	// Note says what the data was and how it was prepared.
	Note string `json:"note,omitempty"`
}

func (m *Model) hash() (string, error) {
	c := *m
	c.SHA256 = ""
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Encode returns the model file: indented JSON with its hash set.
func (m *Model) Encode() ([]byte, error) {
	h, err := m.hash()
	if err != nil {
		return nil, fmt.Errorf("encode story model: %w", err)
	}
	m.SHA256 = h
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode story model: %w", err)
	}
	return append(b, '\n'), nil
}

// Decode reads a model file and checks its format, version, hash and
// feature names.
func Decode(b []byte) (*Model, error) {
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrModel, m.Format, Format)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("%w: version %d, this build reads version %d", ErrModel, m.Version, Version)
	}
	h, err := m.hash()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	if h != m.SHA256 {
		return nil, fmt.Errorf("%w: content hash %s does not match the recorded %s", ErrModel, h, m.SHA256)
	}
	switch m.Stage {
	case "":
	case StageStories:
		if len(m.Ranker.Weights) != len(m.Features) || len(m.Decision.Weights) != len(m.DecisionFeatures) {
			return nil, fmt.Errorf("%w: %d ranker weights for %d features, %d decision weights for %d", ErrModel,
				len(m.Ranker.Weights), len(m.Features), len(m.Decision.Weights), len(m.DecisionFeatures))
		}
		if m.Params.MinRank < 0 || m.Params.MinRank >= 1 || m.Params.MinShared < 0 || m.Params.SmallStory < 0 || m.Params.DecayHours < 0 {
			return nil, fmt.Errorf("%w: invalid params %+v", ErrModel, m.Params)
		}
		return &m, nil
	default:
		return nil, fmt.Errorf("%w: stage %q, want %q or none", ErrModel, m.Stage, StageStories)
	}
	if !slices.Equal(m.Features, featureNames) || len(m.Ranker.Weights) != len(featureNames) {
		return nil, fmt.Errorf("%w: ranker features %v, this build computes %v", ErrModel, m.Features, featureNames)
	}
	if !slices.Equal(m.DecisionFeatures, decisionNames) || len(m.Decision.Weights) != len(decisionNames) {
		return nil, fmt.Errorf("%w: decision features %v, this build computes %v", ErrModel, m.DecisionFeatures, decisionNames)
	}
	if m.Params.Core < 1 || m.Params.DecayHours <= 0 || m.Params.WindowHours <= 0 || m.Params.MinRank < 0 || m.Params.MinRank >= 1 {
		return nil, fmt.Errorf("%w: invalid params %+v", ErrModel, m.Params)
	}
	return &m, nil
}
