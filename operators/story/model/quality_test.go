package model

import (
	"testing"
	"time"
)

// TestQualityUCI trains on uci_dev's folds and scores the held-out fold:
// 5-fold cross-validation grouped by story, times spread by [0, 12h) seed
// 1 and re-sorted, with the labels as given and with the three day-split
// pairs merged. The floors are the figures measured less a margin, so the
// test fails on a regression (newsflow stories eval prints the figures
// with those of the story builder beside them).
func TestQualityUCI(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ten models")
	}
	for _, c := range []struct {
		name            string
		merge           bool
		floorP, floorF1 float64
	}{
		// Measured: P 0.980 R 0.825 F1 0.896 as labelled, P 0.989 R 0.782
		// F1 0.873 merged (the titles as the file has them; newsflow
		// stories eval, which cleans them as the articles operator does,
		// gets R 0.773 F1 0.868 merged).
		{"labelled", false, 0.96, 0.87},
		{"merged", true, 0.97, 0.85},
	} {
		t.Run(c.name, func(t *testing.T) {
			docs := Spread(loadUCI(t, c.merge), 12*time.Hour, 1)
			s := cv(t, docs, 5, TrainOptions{})
			t.Logf("uci_dev %s, 5-fold story-grouped CV, times spread [0, 12h) seed 1: B-cubed P %.4f R %.4f F1 %.4f", c.name, s.P, s.R, s.F1)
			if s.P < c.floorP || s.F1 < c.floorF1 {
				t.Errorf("B-cubed P %.4f (floor %.2f), F1 %.4f (floor %.2f)", s.P, c.floorP, s.F1, c.floorF1)
			}
		})
	}
}
