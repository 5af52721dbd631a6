package model

import (
	"errors"
	"math"
)

// Linear is a logistic model: p = σ(Bias + Σ Weights[i]·x[i]).
type Linear struct {
	Bias    float64   `json:"bias"`
	Weights []float64 `json:"weights"`
}

func (l Linear) logit(x []float64) float64 {
	z := l.Bias
	for i, w := range l.Weights {
		z += w * x[i]
	}
	return z
}

func (l Linear) prob(x []float64) float64 { return sigmoid(l.logit(x)) }

// Logit returns Bias + Σ Weights[i]·x[i].
func (l Linear) Logit(x []float64) float64 { return l.logit(x) }

// Prob returns σ(Logit(x)).
func (l Linear) Prob(x []float64) float64 { return l.prob(x) }

// Sigmoid is the logistic function, exact in both tails.
func Sigmoid(z float64) float64 { return sigmoid(z) }

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// errNoExamples is returned by fitLogistic without examples.
var errNoExamples = errors.New("no examples to fit (no article shares enough words with an earlier story)")

// fitLogistic fits a logistic model to rows x with labels y by Newton's
// method (iteratively reweighted least squares) with an L2 penalty lambda
// on the weights (not the bias); with one class only it returns the
// smoothed prior. It is deterministic: no random start, the
// rows in the order given.
func fitLogistic(x [][]float64, y []bool, lambda float64) (Linear, error) {
	var pos, neg int
	for _, v := range y {
		if v {
			pos++
		} else {
			neg++
		}
	}
	if len(x) == 0 {
		return Linear{}, errNoExamples
	}
	d := len(x[0]) + 1 // bias last
	if pos == 0 || neg == 0 {
		// One class only: the features cannot separate anything, so the
		// model is the prior with one pseudo-example of each class.
		return Linear{Bias: math.Log(float64(pos+1) / float64(neg+1)), Weights: make([]float64, d-1)}, nil
	}
	w := make([]float64, d)
	w[d-1] = math.Log(float64(pos) / float64(neg))
	xi := make([]float64, d)
	for iter := 0; iter < 50; iter++ {
		h := make([][]float64, d)
		for i := range h {
			h[i] = make([]float64, d)
		}
		g := make([]float64, d)
		for r, row := range x {
			copy(xi, row)
			xi[d-1] = 1
			z := 0.0
			for i := range d {
				z += w[i] * xi[i]
			}
			p := sigmoid(z)
			t := 0.0
			if y[r] {
				t = 1
			}
			s := max(p*(1-p), 1e-9)
			for i := range d {
				g[i] += (t - p) * xi[i]
				for j := 0; j <= i; j++ {
					h[i][j] += s * xi[i] * xi[j]
				}
			}
		}
		for i := range d {
			for j := 0; j < i; j++ {
				h[j][i] = h[i][j]
			}
			if i < d-1 {
				h[i][i] += lambda
				g[i] -= lambda * w[i]
			}
		}
		step, err := solve(h, g)
		if err != nil {
			return Linear{}, err
		}
		// Damped: halve the step until the penalized likelihood does not
		// fall, since a full Newton step on nearly separable rows
		// overshoots (the Hessian there is almost flat).
		base := logLikelihood(x, y, w, lambda)
		next := make([]float64, d)
		alpha := 1.0
		for k := 0; ; k++ {
			for i := range d {
				next[i] = w[i] + alpha*step[i]
			}
			if logLikelihood(x, y, next, lambda) >= base || k == 40 {
				break
			}
			alpha /= 2
		}
		var change float64
		for i := range d {
			change = max(change, math.Abs(next[i]-w[i]))
		}
		copy(w, next)
		if change < 1e-9 {
			break
		}
	}
	return Linear{Bias: w[d-1], Weights: append([]float64(nil), w[:d-1]...)}, nil
}

// logLikelihood is the log-likelihood of labels y for rows x under
// weights w (bias last), less the L2 penalty lambda/2·|w|² on the
// weights.
func logLikelihood(x [][]float64, y []bool, w []float64, lambda float64) float64 {
	d := len(w)
	var l float64
	for r, row := range x {
		z := w[d-1]
		for i, v := range row {
			z += w[i] * v
		}
		if !y[r] {
			z = -z
		}
		// log σ(z), without overflow in either tail.
		if z >= 0 {
			l -= math.Log1p(math.Exp(-z))
		} else {
			l += z - math.Log1p(math.Exp(z))
		}
	}
	for _, v := range w[:d-1] {
		l -= lambda / 2 * v * v
	}
	return l
}

// solve solves a·x = b by Gaussian elimination with partial pivoting; a
// and b are overwritten.
func solve(a [][]float64, b []float64) ([]float64, error) {
	n := len(b)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return nil, errors.New("singular system in logistic regression")
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < n; k++ {
				a[r][k] -= f * a[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x, nil
}
