package learn

import _ "embed"

// pretrainedJSON is the model `terrace sim tiering --seed 1` pre-trains
// (written to its --out directory as model.json): the paper's features
// and actions, fitted to transitions of the threshold policy on the five
// simulated workloads. Regenerate it with
//
//	terrace sim tiering --seed 1 --out /tmp/t && cp /tmp/t/model.json internal/curator/learn/pretrained.json
//
//go:embed pretrained.json
var pretrainedJSON []byte

// Pretrained returns a fresh copy of the built-in pre-trained model, the
// learned scheduler's starting point when no other model is configured.
// Its standardization comes from the simulator's scaled node, so on real
// hardware it is a starting point that online learning adjusts, not a
// calibrated policy (docs/design/0006-learned-tiering.md).
func Pretrained() (*Model, error) { return ParseModel(pretrainedJSON) }
