// Package expplot holds the small gonum/plot helpers the experiments
// (bench rebuild, bench scaleout) share: lines, dashed lines, vertical
// markers, and a column of aligned panels saved as one PNG. It owns no
// experiment logic and must not import the experiments.
package expplot
